"""Code generators: one module per target."""
