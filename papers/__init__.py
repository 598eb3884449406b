"""One folder per method, each composing the layers of embody."""
