"""The app's widgets: thin views over the core's view model."""
