"""What a recurring run's trigger is made of, checked before any request: a cron expression, an interval, a window.

KFP's scheduler parses cron with robfig/cron v1, whose fields are *seconds first*:
`second minute hour day-of-month month day-of-week`. A five-field expression is legal there too but means
`second minute hour day-of-month month`, so the usual crontab `30 2 * * 1` would silently run at second 30 of
minute 2 of every hour in January. `parse_cron` therefore reads five fields as a standard crontab and prepends
`0 ` (second zero), and checks each field the way robfig/cron does: numbers in range, `*` and `?`, lists
(`1,15`), ranges (`1-5`), steps (`*/10`, `0-30/5`, `5/15` = from 5 to the maximum), and the names `JAN`-`DEC`
and `SUN`-`SAT` in the month and day-of-week fields only. It has no `L`, `W`, `#`, and Sunday is 0 (not 7).
The grammar is robfig/cron v1.2.0's (the version in KFP's go.mod; `Parse` = 5 or 6 fields with seconds first,
parser.go:174-186; `getRange`, parser.go:207-269), with what KFP would accept but misread refused too: ASCII
digits only (Go's `strconv.Atoi` takes no other), numbers of at most 9 digits, steps no larger than the field,
dates that exist in no chosen month (Feb 30, Apr 31), and intervals beyond a year. `Trigger.warnings` says what
is legal but surprising: a date only leap years have, and a past `--start` with catch-up on.

Example:
    parse_cron("30 2 * * 1").expression         # "0 30 2 * * 1" (converted)
    parse_duration("6h")                        # 21600
    Trigger.make(cron="0 0 3 * * *", start="2025-01-31")
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from foundation.errors import TfxpError

# robfig/cron's descriptors (besides `@every`, which tfxp takes as --every).
DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
MIN_INTERVAL_SECONDS = 60
# The longest --every: a year. KFP adds the interval to Unix seconds in an int64
# (backend/src/crd/controller/scheduledworkflow/util/periodic_schedule.go:60), so 99999999999999999999w would
# overflow there; rarer runs are a cron date (e.g. '0 3 1 1 *' yearly).
MAX_INTERVAL_SECONDS = 366 * 86400
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
        return _ascii_number(
            token, "a number" + (f" or a name {self.names[0].upper()}-{self.names[-1].upper()}" if self.names else "")
        )

    @property
    def span(self) -> int:
        """How many values the field has (60 seconds, 12 months, ...)."""
        return self.high - self.low + 1

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


def _ascii_number(token: str, what: str, longest: int = 9) -> int:
    # robfig/cron reads numbers with Go's strconv.Atoi, which takes ASCII digits only; Python's isdigit() and int()
    # also take other scripts' digits (Arabic-Indic ٣, superscript ²). Long ones are refused before int() reads them.
    if not (token.isascii() and token.isdigit()):
        other_script = " (only ASCII digits 0-9 count)" if token.isdigit() or token.isnumeric() else ""
        raise ValueError(f"{token!r} is not {what}{other_script}")
    if len(token) > longest:
        raise ValueError(f"{token[:12]}... has {len(token)} digits, too many for {what}")
    return int(token)


def _check_item(item: str, field: _Field) -> tuple[set[int], bool]:
    # One list item: range ["/" step], where range is "*", "?", N or N-M (robfig/cron v1.2.0 parser.go:207-269,
    # `getRange`). Returns the values it selects, and whether it is `*` or `?` (robfig's star bit, set whatever
    # the step, parser.go:217-220), which decides how day of month and day of week combine (spec.go:149-158).
    range_part, *steps = item.split("/")
    if len(steps) > 1:
        raise ValueError(f"{item!r} has more than one /")
    step = 1
    if steps:
        if not (steps[0].isascii() and steps[0].isdigit()) or not steps[0].strip("0"):
            raise ValueError(f"the step in {item!r} must be a positive number of ASCII digits 0-9")
        step = _ascii_number(steps[0], "a step")
        if step > field.span:
            raise ValueError(
                f"the step {step} in {item!r} is larger than the field's {field.span} values, so only its start "
                f"would ever match; use a step of 1 to {field.span}, or the single value"
            )
    if range_part in ("*", "?"):
        return set(range(field.low, field.high + 1, step)), True
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
    return set(range(start, end + 1, step)), False


# Days in each month; February has 29 in leap years.
_MONTH_DAYS = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


def _calendar_problem(
    text: str, days: tuple[set[int], bool], months: set[int], weekdays: tuple[set[int], bool]
) -> tuple[str | None, str | None]:
    # (error, warning) for the days the expression selects. robfig/cron ANDs day of month and day of week when
    # either is `*`/`?`, else ORs them (v1.2.0 spec.go:149-158); in the OR case every month has each weekday. In
    # the AND case a date must exist: KFP's API accepts "0 0 0 30 2 *" (its check is `cron.Parse` only,
    # backend/src/apiserver/server/api_converter.go:2088-2092), and robfig's `Next` then finds no such date, gives
    # up after five years and returns the zero time (spec.go:70-75), which the controller takes as the next run
    # (backend/src/crd/controller/scheduledworkflow/util/cron_schedule.go:97).
    (day_set, day_star), (_, week_star) = days, weekdays
    if not (day_star or week_star):
        return None, None
    dates = [(month, day) for month in sorted(months) for day in sorted(day_set) if day <= _MONTH_DAYS[month]]
    if not dates:
        named = ", ".join(_MONTHS[month - 1].capitalize() for month in sorted(months))
        days_text = ", ".join(str(day) for day in sorted(day_set))
        return (
            f"--cron {text!r} names no real date: day {days_text} does not exist in {named}; KFP would accept "
            "it, but its cron library finds no such day, so the recurring run would never fire as meant. Pick "
            "a day every chosen month has (1-28 exist in all; KFP's cron has no L for a month's last day)",
            None,
        )
    if dates == [(2, 29)]:
        return None, f"--cron {text!r} fires only on February 29, so once every four years"
    return None, None


@dataclass(frozen=True)
class CronExpression:
    """Attributes:
    given: The expression as the user wrote it.
    expression: What KFP gets: six fields, seconds first (or a descriptor such as `@daily`).
    warnings: What it does that the user may not expect (fires only in leap years).
    """

    given: str
    expression: str
    warnings: tuple[str, ...] = ()

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
    selected: list[tuple[set[int], bool]] = []
    for value, field in zip(fields, _FIELDS, strict=True):
        try:
            items = value.split(",")
            if "" in items:
                raise ValueError("has an empty list item")
            values: set[int] = set()
            star = False
            for item in items:
                item_values, item_star = _check_item(item, field)
                values |= item_values
                star = star or item_star
            selected.append((values, star))
        except ValueError as error:
            raise ScheduleInputError(
                f"--cron {text!r}: the {field.name} field {value!r}: {error}; it takes {field.allowed()}, with "
                f"{_SYNTAX} (KFP's robfig/cron has no L, W or #)"
            ) from None
    problem, warning = _calendar_problem(text, selected[3], selected[4][0], selected[5])
    if problem:
        raise ScheduleInputError(problem)
    return CronExpression(given, " ".join(fields), (warning,) if warning else ())


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
    # ASCII digits only (re's \d also matches other scripts' digits, which int() reads), at most 9 per number.
    parts = re.findall(r"([0-9]+)([a-z]+)", compact, flags=re.ASCII)
    if not compact or not compact.isascii() or "".join(number + unit for number, unit in parts) != compact:
        raise ScheduleInputError(
            f"--every {text!r} is not an interval; write a number and a unit (s, m, h, d, w), e.g. 30m, 6h, 1d, "
            "1h30m (ASCII digits 0-9 only)"
        )
    unknown = sorted({unit for _, unit in parts if unit not in _UNITS})
    if unknown:
        raise ScheduleInputError(f"--every {text!r}: unknown unit {', '.join(unknown)}; use s, m, h, d or w")
    if any(len(number) > 9 for number, _ in parts):
        raise ScheduleInputError(f"--every {text!r}: a number that long is no interval; the longest is 366d")
    seconds = sum(int(number) * _UNITS[unit] for number, unit in parts)
    if seconds < minimum:
        raise ScheduleInputError(
            f"--every {text!r} is {seconds} s; a pipeline run takes minutes, so use at least {minimum} s "
            f"(e.g. --every 1h); runs that start faster than they finish only queue up behind --max-concurrency"
        )
    if seconds > MAX_INTERVAL_SECONDS:
        raise ScheduleInputError(
            f"--every {text!r} is {format_seconds(seconds)}, longer than the longest interval, 366d; "
            "for rarer runs use --cron with a date, e.g. --cron '0 3 1 1 *' (03:00 on January 1)"
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
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC)


def rfc3339(moment: datetime.datetime) -> str:
    """`2025-01-31T02:00:00Z`, the form KFP's API takes."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        now = now or datetime.datetime.now(datetime.UTC)
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

    def warnings(self, *, catchup: bool, now: datetime.datetime | None = None) -> list[str]:
        """What the trigger will do that the user may not expect: a cron date that exists only in leap years, and a
        `--start` in the past with catch-up on, for which KFP starts every run it "missed" since then, one after
        the other (`cron_schedule.go:97-110`, `periodic_schedule.go:60`: with catch-up the next run is the one after
        the last, from the start time)."""
        notes = list(self.cron.warnings) if self.cron else []
        now = now or datetime.datetime.now(datetime.UTC)
        if catchup and self.start:
            started = parse_time(self.start)
            if started < now:
                missed = ""
                if self.interval_seconds:
                    count = int((now - started).total_seconds() // self.interval_seconds)
                    missed = f" (about {count} run{'s' * (count != 1)} queued behind --max-concurrency)"
                notes.append(
                    f"--start {self.start} is in the past and catch-up is on, so KFP will start every run due since "
                    f"then{missed}; pass --no-catchup to start only from now, or a --start in the future"
                )
        return notes

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
