"""specd's language server: editors reach the daemon through it."""
