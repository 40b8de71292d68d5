"""``python -m systolica.sim.builder.result_child ROWS COLS TYPES BANKS ENTRIES QUEUE``: the
result path's Verilog module (:func:`~systolica.sim.builder.generate.result_module_verilog`)
on stdout, for the tile of that configuration. The child process that
:func:`~systolica.sim.builder.generate.generate_verilog` starts for large tiles, so that
the result path converts in parallel with the rest of the top."""

import sys

USAGE = "usage: python -m systolica.sim.builder.result_child ROWS COLS TYPES BANKS ENTRIES QUEUE"


def main(argv):
    """Write the module; returns the exit status (int; 2 with a usage line on bad input)."""
    from systolica.hdl.config import TileConfig
    from systolica.sim.builder.generate import result_module_verilog

    try:
        rows, cols, types, banks, entries, queue = argv
        config = TileConfig(int(rows), int(cols), types, psum_banks=int(banks),
                            psum_entries=int(entries), queue_depth=int(queue))
    except (TypeError, ValueError) as error:
        print(f"{USAGE}: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(result_module_verilog(config))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
