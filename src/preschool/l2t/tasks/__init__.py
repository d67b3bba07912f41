"""The L2T tasks, one module each (file stem = registry name); ``L2T_TASKS`` imports the one a
lookup names, and all of them when it lists them."""
