"""specd's long-lived process: protocol, scheduler, server, client, config and tracing (the
command line is cli/)."""
