"""Validation helpers shared by the hardware and workload loaders.

Every error is a :class:`SpecError` whose one-line message names the file, the field and the
allowed values, e.g. ``trn2.toml: field tile.rows: -4 is not allowed; allowed: an integer >= 1``.
"""

import tomllib
from importlib import resources
from pathlib import Path

from .units import UNITS, parse_quantity


class SpecError(ValueError):
    """A hardware or workload description that cannot be used.

    Attributes
    ----------
    file : str
        Name of the file (or ``"<preset name>"``) the bad value came from.
    field : str
        Dotted path of the field, e.g. ``chip.hbm_bandwidth``; ``""`` for the file as a whole.
    """

    def __init__(self, file, field, problem, allowed):
        self.file = str(file)
        self.field = field
        # A CSV position ("line 2, column 'K'") reads as itself; a TOML key as "field ...".
        where = (self.file if not field else f"{self.file}, {field}"
                 if field.startswith("line ") else f"{self.file}: field {field}")
        super().__init__(f"{where}: {problem}; allowed: {allowed}")


def load_toml(path):
    """Read a TOML file into a dict; :class:`SpecError` if it is missing or not TOML."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise SpecError(path, "", "file not found", "an existing TOML file") from None
    except IsADirectoryError:
        raise SpecError(path, "", "a folder, not a file", "a TOML file") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(path, "", f"not valid TOML ({e})", "a TOML document") from None


def load_packaged_toml(path, filename):
    """``(data, name)`` of ``path``, or of the packaged ``presets/<filename>`` when None."""
    if path is not None:
        return load_toml(path), str(path)
    folder = resources.files("systolica.scaling").joinpath("presets", filename)
    with resources.as_file(folder) as p:
        return load_toml(p), filename


def preset_names_in(folder):
    """Stems of the ``.toml`` files in a packaged preset folder (a ``Traversable``), sorted."""
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_preset_or_file(name_or_path, folder, kind, parse):
    """Parse a packaged preset by name, or a ``.toml`` file by path, with ``parse(data, name)``.

    Raises
    ------
    SpecError
        If the text names neither a preset in ``folder`` nor an existing ``.toml`` file
        (the message lists the presets), or whatever ``parse`` raises.
    """
    text = str(name_or_path)
    names = preset_names_in(folder)
    if text in names:
        with resources.as_file(folder.joinpath(text + ".toml")) as path:
            return parse(load_toml(path), f"{text}.toml")
    path = Path(text)
    if not path.exists() or path.suffix != ".toml":
        what = (f"a {path.suffix or 'suffix-less'} file, not a .toml {kind} file"
                if path.is_file() else f"no such {kind} preset or .toml file")
        raise SpecError(text, "", what,
                        ", ".join(names) + ", or a path to a .toml file")
    return parse(load_toml(path), path.name)


class Table:
    """A TOML table read field by field, each read checked and the unknown keys refused."""

    def __init__(self, file, data, prefix=""):
        self.file = file
        self.data = data
        self.prefix = prefix
        self.used = set()
        if not isinstance(data, dict):
            raise SpecError(file, prefix, f"{data!r} is not a table", "a TOML table")

    def _path(self, key):
        return f"{self.prefix}.{key}" if self.prefix else key

    def has(self, key):
        return key in self.data

    def error(self, key, problem, allowed):
        return SpecError(self.file, self._path(key), problem, allowed)

    def _get(self, key, required):
        self.used.add(key)
        if key not in self.data:
            if required:
                raise self.error(key, "missing", "a value must be given")
            return None
        return self.data[key]

    def int(self, key, minimum=1, required=True):
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.error(key, f"{value!r} is not allowed", f"an integer >= {minimum}")
        return value

    def number(self, key, required=True):
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            raise self.error(key, f"{value!r} is not allowed", "a number > 0")
        return value

    def str(self, key, required=True, choices=None):
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, str) or (choices is not None and value not in choices):
            allowed = ", ".join(repr(c) for c in choices) if choices else "a string"
            raise self.error(key, f"{value!r} is not allowed", allowed)
        return value

    def quantity(self, key, kind, required=True):
        value = self._get(key, required)
        if value is None:
            return None
        try:
            return parse_quantity(value, kind)
        except ValueError:
            raise self.error(
                key, f"{value!r} is not a {kind} figure",
                "'<number> <unit>' with unit one of " + ", ".join(UNITS[kind]),
            ) from None

    def table(self, key, required=True):
        value = self._get(key, required)
        if value is None:
            return None
        return Table(self.file, value, self._path(key))

    def finish(self):
        """Refuse keys nobody read (typos must not pass silently)."""
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            known = ", ".join(sorted(self.used)) or "none"
            raise self.error(unknown[0], "unknown field", known)
