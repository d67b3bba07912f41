"""The kinds of ``preschool transform``: one module per kind, named after it, with a command module's contract
(``commands/transform.py``'s ``TRANSFORMS`` lists this folder without importing it)."""
