"""The commands of ``preschool``: one file per command, named after it, registering the module that
implements it (``cli.COMMANDS``; the order of ``--help`` is each one's ``order``). Only these small files
are imported to list the commands; a command's own module is imported when it is the command run."""
