"""Whole-program bit packing of stream beats with numpy, from the Amaranth layouts.

Packing beats one at a time through ``layout.const(...)`` and ``layout.from_bits(...)`` costs
tens of microseconds per field in Python; a program of a real model has hundreds of thousands
of beats. :class:`LayoutPacker` reads each field's bit offset and width from the layout once
(the layouts in :mod:`systolica.hdl.layouts` stay the one source of truth) and then packs or
unpacks whole arrays of beats with numpy bit operations, to and from the hex text that
``$readmemh`` reads and ``$writememh`` writes.

A field is named by its path in the layout: ``"op"`` for a struct member, ``"data"`` for an
array of unsigned lanes (values shaped ``[beats, lanes]``).
"""

import numpy as np
from amaranth.hdl import Shape
from amaranth.lib import data

_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_HEX_VALUES = np.full(256, 255, dtype=np.uint8)
_HEX_VALUES[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16)
_HEX_VALUES[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16)


class LayoutPacker:
    """Packs and unpacks arrays of beats of one Amaranth layout.

    Parameters
    ----------
    layout : amaranth.lib.data.Layout
        A ``StructLayout`` whose members are scalar shapes (ints, enums: at most 64 bits) or
        ``ArrayLayout`` s of unsigned scalar lanes.

    Attributes
    ----------
    size : int
        Width of one beat in bits.
    digits : int
        Hex digits of one beat (``ceil(size / 4)``).
    fields : dict
        ``name -> (offset, width, lanes)``: bit offset of the field (or of lane 0), width of
        one value in bits, and the number of lanes (``None`` for a scalar field).

    Raises
    ------
    TypeError
        If the layout has a member this packer cannot vectorise (a nested struct, an array
        of structs, a scalar wider than 64 bits).
    """

    def __init__(self, layout):
        self.size = layout.size
        self.digits = (self.size + 3) // 4
        self.fields = {}
        for name, field in layout:
            shape = field.shape
            if isinstance(shape, data.ArrayLayout):
                element = Shape.cast(shape.elem_shape)
                if isinstance(shape.elem_shape, data.Layout) or element.signed:
                    raise TypeError(f"field {name!r}: only arrays of unsigned lanes pack")
                self.fields[name] = (field.offset, element.width, shape.length)
            elif isinstance(shape, data.Layout):
                raise TypeError(f"field {name!r}: nested layouts do not pack")
            else:
                width = Shape.cast(shape).width
                if width > 64:
                    raise TypeError(f"field {name!r}: {width} bits is wider than 64")
                self.fields[name] = (field.offset, width, None)

    def _field_values(self, name, values, beats):
        offset, width, lanes = self.fields[name]
        want = (beats,) if lanes is None else (beats, lanes)
        values = np.broadcast_to(np.asarray(values), want).astype(np.uint64)
        if width < 64 and values.size and int(values.max()) >> width:
            raise ValueError(f"field {name!r}: a value does not fit in {width} bits")
        return values.reshape(beats, -1)

    @staticmethod
    def _split(values, width, step):
        """``[beats, lanes]`` values -> ``[beats, lanes * width / step]`` digits of ``step``
        bits each, least significant first."""
        kind = next(t for t in (np.uint8, np.uint16, np.uint32, np.uint64)
                    if np.dtype(t).itemsize * 8 >= width)   # narrow words: less to move
        shifts = np.arange(0, width, step, dtype=kind)
        digits = (values.astype(kind)[..., None] >> shifts) & kind((1 << step) - 1)
        return digits.astype(np.uint8).reshape(values.shape[0], -1)

    def _aligned(self, name):
        offset, width, _ = self.fields[name]
        return offset % 4 == 0 and width % 4 == 0

    def pack_bits(self, beats, **values):
        """Beats as a bit matrix: uint8 ``[beats, size]``, bit ``i`` of the payload in column
        ``i``. ``values``: per field name, an array ``[beats]`` (scalar field) or
        ``[beats, lanes]`` (lane array), or anything that broadcasts to it; fields not given
        are zero.

        Raises
        ------
        KeyError
            If a name is not a field of the layout.
        ValueError
            If a value does not fit its field.
        """
        bits = np.zeros((beats, self.digits * 4), dtype=np.uint8)
        for name, value in values.items():
            self._check_name(name)
            offset, width, _ = self.fields[name]
            field_bits = self._split(self._field_values(name, value, beats), width, 1)
            bits[:, offset:offset + field_bits.shape[1]] = field_bits
        return bits[:, :self.size]

    def _check_name(self, name):
        if name not in self.fields:
            raise KeyError(f"{name!r} is not a field of this layout; fields: "
                           f"{', '.join(self.fields)}")

    def pack_hex(self, beats, **values):
        """The beats as ``$readmemh`` text: one line of :attr:`digits` hex digits per beat
        (str). Arguments as :meth:`pack_bits`."""
        if beats == 0:
            return ""
        for name in values:
            self._check_name(name)
        # Fields on 4-bit boundaries go straight to hex digits; the rest through bits.
        loose = {name: v for name, v in values.items() if not self._aligned(name)}
        bits = np.zeros((beats, self.digits * 4), dtype=np.uint8)
        bits[:, :self.size] = self.pack_bits(beats, **loose)
        nibbles = bits.reshape(beats, self.digits, 4) @ np.array([1, 2, 4, 8], np.uint8)
        for name, value in values.items():
            if name not in loose:
                offset, width, _ = self.fields[name]
                digits = self._split(self._field_values(name, value, beats), width, 4)
                nibbles[:, offset // 4:offset // 4 + digits.shape[1]] = digits
        text = np.empty((beats, self.digits + 1), dtype=np.uint8)
        text[:, :-1] = _HEX_DIGITS[nibbles[:, ::-1]]
        text[:, -1] = ord("\n")
        return text.tobytes().decode("ascii")

    def pack_ints(self, beats, **values):
        """The beats as Python ints (list), for drivers that assign one beat at a time."""
        return [int(line, 16) for line in self.pack_hex(beats, **values).splitlines()]

    def unpack_hex(self, text):
        """Fields of the beats in ``$writememh`` text (one value per line; ``//`` comments
        and blank lines are skipped; ``x``/``z`` digits are an error).

        Returns
        -------
        dict
            ``name -> numpy.ndarray`` of uint64: ``[beats]`` per scalar field, ``[beats,
            lanes]`` per lane array.

        Raises
        ------
        ValueError
            If a line is not a hex number of at most :attr:`digits` digits.
        """
        raw = text.encode("ascii")
        width = self.digits + 1
        if b"/" not in raw and len(raw) % width == 0 and (
                raw[width - 1::width] == b"\n" * (len(raw) // width)):
            # One full-width word per line, as Verilator writes them: no Python per line.
            table = np.frombuffer(raw, np.uint8).reshape(-1, width)[:, :-1]
            return self._unpack_nibbles(self._nibbles(table))
        lines = [line.split("//", 1)[0].strip() for line in text.splitlines()]
        lines = [line for line in lines if line]
        return self._unpack_nibbles(self._hex_nibbles(lines))

    def _nibbles(self, table):
        """``[beats, digits]`` ASCII hex digits -> their values, least significant first."""
        nibbles = _HEX_VALUES[table]
        if (nibbles == 255).any():
            raise ValueError("a line holds a character that is not a hex digit (x or z "
                             "bits from the simulation?)")
        return nibbles[:, ::-1]

    def _hex_nibbles(self, lines):
        if any(len(line) > self.digits for line in lines):
            raise ValueError(f"a line has more than {self.digits} hex digits")
        raw = "".join(line.rjust(self.digits, "0") for line in lines).encode("ascii")
        return self._nibbles(np.frombuffer(raw, np.uint8).reshape(len(lines), self.digits))

    def _unpack_nibbles(self, nibbles):
        """Fields of ``[beats, digits]`` hex digit values, least significant first."""
        beats = nibbles.shape[0]
        out = {}
        octets = None
        for name, (offset, width, lanes) in self.fields.items():
            count = 1 if lanes is None else lanes
            if offset % 8 == 0 and width in (8, 16, 32, 64):
                # Byte-aligned lanes: reassemble bytes and view them as little-endian words.
                if octets is None:
                    even = np.zeros((beats, (self.digits + 1) // 2 * 2), np.uint8)
                    even[:, :self.digits] = nibbles
                    octets = np.ascontiguousarray(even[:, 0::2] | (even[:, 1::2] << 4))
                chunk = np.ascontiguousarray(
                    octets[:, offset // 8:(offset + width * count) // 8])
                values = chunk.view(f"<u{width // 8}").astype(np.uint64)
            elif self._aligned(name):
                chunk = nibbles[:, offset // 4:(offset + width * count) // 4]
                chunk = chunk.astype(np.uint64).reshape(beats, count, width // 4)
                shifts = np.arange(0, width, 4, dtype=np.uint64)
                values = (chunk << shifts).sum(axis=2, dtype=np.uint64)
            else:
                # Only the digits that hold the field are split into bits.
                first, end = offset // 4, -(-(offset + width * count) // 4)
                bits = ((nibbles[:, first:end, None] >> np.arange(4, dtype=np.uint8)) & 1)
                bits = bits.reshape(beats, (end - first) * 4)
                skip = offset - first * 4
                chunk = bits[:, skip:skip + width * count].astype(np.uint64)
                chunk = chunk.reshape(beats, count, width)
                shifts = np.arange(width, dtype=np.uint64)
                values = (chunk << shifts).sum(axis=2, dtype=np.uint64)
            values = values.reshape(beats, count)
            out[name] = values[:, 0] if lanes is None else values
        return out

    def unpack_ints(self, raws):
        """Fields of beats given as ints (sequence); see :meth:`unpack_hex`."""
        return self._unpack_nibbles(self._hex_nibbles([f"{int(raw):0{self.digits}x}"
                                                       for raw in raws]))

    def unpack_bits(self, bits):
        """Fields of a bit matrix ``[beats, size]`` (see :meth:`pack_bits` and
        :meth:`unpack_hex`)."""
        out = {}
        for name, (offset, width, lanes) in self.fields.items():
            count = 1 if lanes is None else lanes
            chunk = bits[:, offset:offset + width * count].astype(np.uint64)
            chunk = chunk.reshape(bits.shape[0], count, width)
            values = (chunk << np.arange(width, dtype=np.uint64)).sum(axis=2, dtype=np.uint64)
            out[name] = values[:, 0] if lanes is None else values
        return out
