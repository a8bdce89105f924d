"""specd's command line, `specd COMMAND`: argparse and one small function per command, calling the
libraries (specd.daemon, specd.lsp, specd.models). It is the top layer: nothing imports it."""
