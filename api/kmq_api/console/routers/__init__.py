"""The console's routes: one module per resource."""
