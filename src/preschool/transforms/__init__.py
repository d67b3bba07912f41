"""The kinds of ``preschool transform``: one file per kind, named after it, registering the module that
implements it (``transform_cli.TRANSFORMS``)."""
