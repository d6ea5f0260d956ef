"""The built-in sample corpus and the tools that turn it into a workspace."""
