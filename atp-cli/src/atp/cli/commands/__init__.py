"""The built-in commands, each imported only when it is called."""
