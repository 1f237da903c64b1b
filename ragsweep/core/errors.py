"""The one exception type for a user's mistake: the CLI prints it as one line and exits non-zero."""


class RagsweepError(Exception):
    """Bad input or an unreachable source, with a message that says what to fix.

    Name the file, the record and the field where there is one, e.g.
    ``testset.json: record 3: field 'question': expected a string, got 42``.
    """


def check_at_least(value: float, least: float, source: str, meaning: str = "") -> float:
    """``value`` when it is ``least`` or more; else the one way a count or size is refused:
    ``<source>: must be <least><meaning> or more, not <value>``."""
    if value < least:
        raise RagsweepError(
            f"{source}: must be {_plain(least)}{meaning} or more, not {_plain(value)}"
        )
    return value


def _plain(number: float) -> str:
    """``number`` as written, without a float's ``.0`` or exponent: -1, -5000000, -0.5."""
    return str(int(number)) if float(number).is_integer() else str(number)


def safe_url(url: object) -> str:
    """A database URL for messages and logs, its password hidden."""
    import sqlalchemy as sa

    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return "<unparseable URL>"


def missing_extra(package: str | None, extra: str, what: str) -> RagsweepError:
    """The one-line error for an optional part whose packages are not installed:
    ``the milvus vector store needs pymilvus: pip install 'ragsweep[milvus]'``."""
    package = (package or "a package").split(".")[0]
    return RagsweepError(f"{what} needs {package}: pip install 'ragsweep[{extra}]'")
