"""The L2T tasks, one module each (file stem = registry name); ``L2T_TASKS`` imports them all on first use."""
