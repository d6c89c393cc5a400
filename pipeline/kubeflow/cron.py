"""What a recurring run's trigger is made of, checked before any request: a cron expression, an interval, a window.

KFP's scheduler parses cron with robfig/cron v1, whose fields are *seconds first*:
`second minute hour day-of-month month day-of-week`. A five-field expression is legal there too but means
`second minute hour day-of-month month`, so the usual crontab `30 2 * * 1` would silently run at second 30 of
minute 2 of every hour in January. `parse_cron` therefore reads five fields as a standard crontab and prepends
`0 ` (second zero), and checks each field the way robfig/cron does: numbers in range, `*` and `?`, lists
(`1,15`), ranges (`1-5`), steps (`*/10`, `0-30/5`, `5/15` = from 5 to the maximum), and the names `JAN`-`DEC`
and `SUN`-`SAT` in the month and day-of-week fields only. It has no `L`, `W`, `#`, and Sunday is 0 (not 7).

Example:
    parse_cron("30 2 * * 1").expression         # "0 30 2 * * 1" (converted)
    parse_duration("6h")                        # 21600
    Trigger.make(cron="0 0 3 * * *", start="2025-01-31")
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from components.errors import TfxpError

# robfig/cron's descriptors (besides `@every`, which tfxp takes as --every).
DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
MIN_INTERVAL_SECONDS = 60
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_SYNTAX = "numbers, *, ?, lists a,b, ranges a-b and steps */n, a-b/n or a/n"


class ScheduleInputError(TfxpError, ValueError):
    """A cron expression, interval or time that KFP would refuse or misread; the message says how to fix it."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    first_name: int = 0  # the number of names[0]

    def number(self, token: str) -> int:
        if token.lower() in self.names:
            return self.first_name + self.names.index(token.lower())
        if not token.isdigit():
            named = f" or a name {self.names[0].upper()}-{self.names[-1].upper()}" if self.names else ""
            raise ValueError(f"{token!r} is not a number{named}")
        return int(token)

    def allowed(self) -> str:
        names = f" or {self.names[0].upper()}-{self.names[-1].upper()}" if self.names else ""
        return f"{self.low}-{self.high}{names}"


_FIELDS = (
    _Field("second", 0, 59),
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, _MONTHS, first_name=1),
    _Field("day of week", 0, 6, _DAYS),
)


def _check_item(item: str, field: _Field) -> None:
    # One list item: range ["/" step], where range is "*", "?", N or N-M (robfig/cron's getRange).
    range_part, *steps = item.split("/")
    if len(steps) > 1:
        raise ValueError(f"{item!r} has more than one /")
    if steps and not (steps[0].isdigit() and int(steps[0]) > 0):
        raise ValueError(f"the step in {item!r} must be a positive number")
    if range_part in ("*", "?"):
        return
    bounds = range_part.split("-")
    if len(bounds) > 2:
        raise ValueError(f"{item!r} has more than one -")
    start = field.number(bounds[0])
    end = field.number(bounds[1]) if len(bounds) == 2 else (field.high if steps else start)
    for value in (start, end):
        if not field.low <= value <= field.high:
            sunday = " (Sunday is 0)" if field.name == "day of week" and value == 7 else ""
            raise ValueError(f"{value} is outside {field.low}-{field.high}{sunday}")
    if start > end:
        raise ValueError(f"the range {range_part!r} runs backwards")


@dataclass(frozen=True)
class CronExpression:
    """Attributes:
    given: The expression as the user wrote it.
    expression: What KFP gets: six fields, seconds first (or a descriptor such as `@daily`).
    """

    given: str
    expression: str

    @property
    def converted(self) -> bool:
        """Whether a five-field crontab expression was turned into KFP's six-field form."""
        return len(self.given.split()) == 5


def parse_cron(text: str) -> CronExpression:
    """Checks a cron expression and returns it in KFP's six-field, seconds-first form.

    Args:
        text: Six fields (`second minute hour day-of-month month day-of-week`), five fields (a standard
            crontab line, converted by prepending `0 `), or a descriptor such as `@daily`.

    Returns:
        The given and the converted expression.

    Raises:
        ScheduleInputError: a field KFP's robfig/cron would refuse, a wrong number of fields, or `@every`.

    Example:
        >>> parse_cron("*/15 * * * *").expression
        '0 */15 * * * *'
    """
    given = " ".join(text.split())
    if given.startswith("@"):
        if given.startswith("@every"):
            raise ScheduleInputError(f"--cron {text!r}: for a fixed interval use --every (e.g. --every 6h)")
        if given not in DESCRIPTORS:
            raise ScheduleInputError(f"--cron {text!r} is not a descriptor KFP knows; use one of {sorted(DESCRIPTORS)}")
        return CronExpression(given, given)
    fields = given.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    elif len(fields) != 6:
        raise ScheduleInputError(
            f"--cron {text!r} has {len(fields)} fields; KFP takes six (second minute hour day-of-month month "
            "day-of-week, e.g. '0 0 2 * * *' for 02:00 daily) or a five-field crontab line, which tfxp converts"
        )
    for value, field in zip(fields, _FIELDS, strict=True):
        try:
            items = value.split(",")
            if "" in items:
                raise ValueError("has an empty list item")
            for item in items:
                _check_item(item, field)
        except ValueError as error:
            raise ScheduleInputError(
                f"--cron {text!r}: the {field.name} field {value!r}: {error}; it takes {field.allowed()}, with "
                f"{_SYNTAX} (KFP's robfig/cron has no L, W or #)"
            ) from None
    return CronExpression(given, " ".join(fields))


def parse_duration(text: str, minimum: int = MIN_INTERVAL_SECONDS) -> int:
    """Seconds in an interval such as `90s`, `30m`, `6h`, `1d`, `1w` or `1h30m`.

    Args:
        text: Whole numbers, each followed by a unit: s, m, h, d or w.
        minimum: The shortest interval accepted, in seconds (default one minute: a pipeline runs longer).

    Raises:
        ScheduleInputError: no unit, an unknown unit, or an interval shorter than `minimum`.

    Example:
        >>> parse_duration("1h30m")
        5400
    """
    compact = text.strip().lower().replace(" ", "")
    parts = re.findall(r"(\d+)([a-z]+)", compact)
    if not compact or "".join(number + unit for number, unit in parts) != compact:
        raise ScheduleInputError(
            f"--every {text!r} is not an interval; write a number and a unit (s, m, h, d, w), e.g. 30m, 6h, 1d, 1h30m"
        )
    unknown = sorted({unit for _, unit in parts if unit not in _UNITS})
    if unknown:
        raise ScheduleInputError(f"--every {text!r}: unknown unit {', '.join(unknown)}; use s, m, h, d or w")
    seconds = sum(int(number) * _UNITS[unit] for number, unit in parts)
    if seconds < minimum:
        raise ScheduleInputError(
            f"--every {text!r} is {seconds} s; a pipeline run takes minutes, so use at least {minimum} s "
            f"(e.g. --every 1h); runs that start faster than they finish only queue up behind --max-concurrency"
        )
    return seconds


def parse_time(text: str, option: str = "--start") -> datetime.datetime:
    """An ISO 8601 date or date-time as an aware UTC time; a time without a zone is UTC.

    Raises:
        ScheduleInputError: not a date or date-time.
    """
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ScheduleInputError(
            f"{option} {text!r} is not a date or time; use ISO 8601, e.g. 2025-01-31 or 2025-01-31T02:00:00Z "
            "(no zone = UTC)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc)


def rfc3339(moment: datetime.datetime) -> str:
    """`2025-01-31T02:00:00Z`, the form KFP's API takes."""
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Trigger:
    """When a recurring run starts runs: a cron expression or an interval, within an optional window.

    Attributes:
        cron: KFP's six-field expression, or None.
        interval_seconds: Seconds between runs, or None.
        start: RFC 3339 UTC time before which no run starts; None = now.
        end: RFC 3339 UTC time after which no run starts; None = never.
    """

    cron: CronExpression | None = None
    interval_seconds: int | None = None
    start: str | None = None
    end: str | None = None

    @classmethod
    def make(
        cls,
        *,
        cron: str | None = None,
        every: str | None = None,
        start: str | None = None,
        end: str | None = None,
        now: datetime.datetime | None = None,
    ) -> Trigger:
        """Checks and combines the `--cron`/`--every`/`--start`/`--end` options.

        Args:
            cron: A cron expression (see `parse_cron`).
            every: An interval (see `parse_duration`).
            start: An ISO 8601 time (see `parse_time`).
            end: An ISO 8601 time after `start` and after `now`.
            now: The current time (tests pass a fixed one).

        Raises:
            ScheduleInputError: neither or both of cron and every, or a bad expression, interval or window.
        """
        if (cron is None) == (every is None):
            raise ScheduleInputError(
                "give exactly one of --cron EXPR (e.g. --cron '0 2 * * *') and --every DURATION (e.g. --every 6h)"
            )
        start_time = parse_time(start, "--start") if start else None
        end_time = parse_time(end, "--end") if end else None
        now = now or datetime.datetime.now(datetime.timezone.utc)
        if end_time is not None:
            if start_time is not None and end_time <= start_time:
                raise ScheduleInputError(f"--end {end} is not after --start {start}; no run would start")
            if end_time <= now:
                raise ScheduleInputError(f"--end {end} is in the past ({rfc3339(now)} now); no run would start")
        return cls(
            cron=parse_cron(cron) if cron is not None else None,
            interval_seconds=parse_duration(every) if every is not None else None,
            start=rfc3339(start_time) if start_time else None,
            end=rfc3339(end_time) if end_time else None,
        )

    def describe(self) -> str:
        """`cron 0 0 2 * * *` or `every 6h`, plus the window when there is one."""
        text = f"cron {self.cron.expression}" if self.cron else f"every {format_seconds(self.interval_seconds or 0)}"
        if self.start:
            text += f" from {self.start}"
        if self.end:
            text += f" until {self.end}"
        return text


def format_seconds(seconds: int) -> str:
    """`6h`, `1d`, `1h30m`, `90s` → `1m30s`: the largest units first."""
    if seconds <= 0:
        return f"{seconds}s"
    parts = []
    for unit, size in sorted(_UNITS.items(), key=lambda item: -item[1]):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
