"""specd's long-lived process: protocol, scheduler, server, client and the CLI."""
