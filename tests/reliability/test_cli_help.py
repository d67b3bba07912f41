"""Every option of every command says what it does and its default (issue 40, item 19): ten options of
``transform l2t --help`` had no description at all, and others a description without the default they take.

The test builds the whole parser (every command imported, ``transform`` and ``corpus`` kinds included) and
walks it; an option added later without help text, or with a default its help does not name, fails here."""

import argparse

from preschool.cli import build_parser


def _options(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    """``(command path, action)`` for every argument of ``parser`` and of its sub-parsers, recursively."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*path, name))
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield path, action


def _states_default(action: argparse.Action) -> bool:
    """Whether the help names the default: the word and the value (as given, or an integer with thousands
    separators), or argparse's ``%(default)s``. A flag (no value) is off unless given, and an empty list
    (a repeatable option) is nothing: neither has a default to state."""
    d, text = action.default, action.help or ""
    if d is None or d is argparse.SUPPRESS or action.nargs == 0 or d == []:
        return True
    if "%(default)" in text:
        return True
    forms = {str(d)} | ({f"{d:,}"} if isinstance(d, int) and not isinstance(d, bool) else set())
    return "default" in text.lower() and any(f in text for f in forms)


def test_the_walk_reaches_every_command_and_kind():
    paths = {path for path, _ in _options(build_parser(), ("preschool",))}
    for expected in [("preschool", "run"), ("preschool", "transform", "l2t"), ("preschool", "corpus", "stories"),
                     ("preschool", "launch"), ("preschool", "plan"), ("preschool", "eval")]:
        assert expected in paths


def test_every_option_has_help_that_states_its_default():
    missing, no_default = [], []
    for path, action in _options(build_parser(), ("preschool",)):
        name = f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}"
        if not (action.help or "").strip():
            missing.append(name)
        elif not _states_default(action):
            no_default.append(f"{name} (default {action.default!r}): {action.help}")
    assert not missing, "options without help text:\n" + "\n".join(missing)
    assert not no_default, "options whose help does not name their default:\n" + "\n".join(no_default)


def test_transform_l2t_help_describes_the_ten_options_the_issue_named():
    parser = build_parser(["transform", "l2t", "--help"])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["transform"]
    l2t = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices["l2t"]
    for option in ("--scenario", "--ratio-by", "--packer", "--seq-len", "--splitter", "--word-pool", "--min-words",
                   "--val-fraction", "--seed", "--workers"):
        action = next(a for a in l2t._actions if option in a.option_strings)
        assert action.help and _states_default(action), option
