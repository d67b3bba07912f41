"""The commands of ``preschool``: one module per command, named after it (``HELP``, ``ORDER``,
``add_arguments``, ``run``; the contract is in ``preschool/cli.py``). ``cli.COMMANDS`` lists this folder and
reads each module's ``HELP`` and ``ORDER`` from its source; a command's module is imported when it is the
command run."""
