"""Fused attention forward with an online softmax (flash style), one head, NKI 0.6 style.

``out[Sq, d] = softmax(q.T @ k * scale) @ v`` with q [d, Sq], k [d, Sk] (head dimension on
the partitions: the contraction of ``q.T @ k``), v [Sk, d]; d <= 128, Sq a multiple of 128, Sk
a multiple of 512.

The 128-query tiles are taken in groups of up to ``GROUP`` (``affine_range`` over groups);
for each group, keys and values stream in blocks of 512 (``sequential_range``: the running
max, sum and output carry from block to block) through two SBUF buffers, block kb + 1
loading while block kb computes, each block's K [d, 512] and V 4 x [128, d] loaded once and
shared by the group's query tiles. Within a block the work is issued phase
by phase over the group's tiles, so that the engines overlap: TensorE computes every tile's
scores (one PSUM bank each) while VectorE and ScalarE run the first tiles' softmax
statistics and ``exp``; then, tile by tile, TensorE transposes the probabilities (4 x [128,
128] into one PSUM bank), ScalarE copies them to SBUF, TensorE multiplies them with V and
VectorE rescales the output, each engine on a different tile at a time. The row sums
divide at the end.

Row tiles (``row_tiles`` R = 2 or 4, when ``d <= 128 / R``): each 128-query tile's scores
are R matmuls of ``128 / R`` queries, sub-tile r in the diagonal PE tile at ``(r t, r t)``
of size ``(t, t)``, ``t = 128 / R`` (``tile_position`` / ``tile_size`` of
``nki.isa.nc_matmul``, NKI API reference, "Tiling mode"). Its operands sit in the SBUF
partitions of its row tile, ``r t .. r t + d - 1`` (the queries of sub-tile r, and a copy of
the K block for each row tile), and its scores land in PSUM partitions ``r t .. r t + t - 1``
(the tile's columns, ``systolica.golden.Tile.partitions``), so the [128, block] scores are
where the untiled kernel puts them and everything after is unchanged. The R sub-tile
matmuls share no PE row or column, so they run at the same time.
"""

from systolica.nki import isa as nisa
from systolica.nki import language as nl

P = 128
KB = 512         # keys per block: one PSUM bank of scores
GROUP = 4        # query tiles sharing a K/V block (their scores take 4 of the 8 PSUM banks)


def _load_kv(k, v, k_sb, v_sb, kb, block=KB, row_tiles=1):
    """K block ``kb`` [d, block] (into partitions r 128 / row_tiles .. + d for each row tile
    r) and V block [block, d] (as block / 128 x [128, d]) into buffer kb % 2."""
    buf = kb % 2
    d = k.shape[0]
    for r in nl.affine_range(row_tiles):
        p0 = r * (P // row_tiles)
        nisa.dma_copy(dst=k_sb[p0:p0 + d, buf, :], src=k[:, kb * block:(kb + 1) * block])
    for c in nl.affine_range(block // P):
        r0 = kb * block + c * P
        nisa.dma_copy(dst=v_sb[:, buf, c, :], src=v[r0:r0 + P, :])


def attention_fwd(q, k, v, scale=None, block=KB, row_tiles=1):
    """Returns out [Sq, d] in q's type. ``block``: keys per block, a multiple of 128 up to
    ``KB`` (one PSUM bank of scores); smaller blocks serve key counts under 512.
    ``row_tiles``: 1 (whole array), or 2 / 4 diagonal PE tiles for the scores (see the
    module docstring; 4 needs NeuronCore-v3 or later), with ``d <= 128 / row_tiles``."""
    d, sq = q.shape
    sk = k.shape[1]
    assert block % P == 0 and P <= block <= KB, \
        f"need block a multiple of {P} up to {KB}; got {block}"
    assert row_tiles in (1, 2, 4) and d <= P // row_tiles, \
        f"need row_tiles 1, 2 or 4 with d <= {P} / row_tiles; got {row_tiles}, d={d}"
    ts = P // row_tiles          # queries (and PE rows, columns) of one row tile
    assert d <= P and sq % P == 0 and sk % block == 0, \
        f"need d <= {P}, Sq % {P} == 0 and Sk % {block} == 0; got d={d}, Sq={sq}, Sk={sk}"
    scale = d ** -0.5 if scale is None else scale
    nq = sq // P
    g = min(GROUP, nq)
    assert nq % g == 0, f"Sq / {P} = {nq} query tiles must be a multiple of {g}"
    out = nl.ndarray((sq, d), q.dtype, buffer=nl.shared_hbm)
    for grp in nl.affine_range(nq // g):
        # sub-tile r (queries r ts .. r ts + ts - 1 of a tile) in partitions r ts .. r ts + d
        q_sb = nl.ndarray((P if row_tiles > 1 else d, g, ts), q.dtype, buffer=nl.sbuf)
        for j in nl.affine_range(g):
            for r in nl.affine_range(row_tiles):
                q0 = (grp * g + j) * P + r * ts
                nisa.dma_copy(dst=q_sb[r * ts:r * ts + d, j, :], src=q[:, q0:q0 + ts])
        run_max = nl.ndarray((P, g), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=run_max, value=-3.0e38)
        run_sum = nl.ndarray((P, g), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=run_sum, value=0.0)
        acc = nl.ndarray((P, g, d), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        # K/V blocks stream through two buffers: block kb + 1 loads while block kb computes
        # (one copy of the K block per row tile, in its partitions)
        k_sb = nl.ndarray((P if row_tiles > 1 else d, 2, block), k.dtype, buffer=nl.sbuf)
        v_sb = nl.ndarray((P, 2, block // P, d), v.dtype, buffer=nl.sbuf)
        _load_kv(k, v, k_sb, v_sb, 0, block, row_tiles)
        for kb in nl.sequential_range(sk // block):
            cur = kb % 2
            if kb + 1 < sk // block:
                _load_kv(k, v, k_sb, v_sb, kb + 1, block, row_tiles)
            # scores of every tile of the group (TensorE); with row tiles, sub-tile r's
            # [ts, block] scores go to PSUM partitions r ts .. r ts + ts - 1
            s_ps = nl.ndarray((P, g, block), nl.float32, buffer=nl.psum)
            for j in nl.affine_range(g):
                if row_tiles == 1:
                    nisa.nc_matmul(dst=s_ps[:, j, :], stationary=q_sb[:, j, :],
                                   moving=k_sb[:, cur, :])
                    continue
                for r in nl.affine_range(row_tiles):
                    rows = slice(r * ts, r * ts + d)
                    nisa.nc_matmul(dst=s_ps[r * ts:(r + 1) * ts, j, :], stationary=q_sb[rows, j, :],
                                   moving=k_sb[rows, cur, :], tile_position=(r * ts, r * ts),
                                   tile_size=(ts, ts))
            # softmax statistics (VectorE) and probabilities (ScalarE), tile by tile; the
            # running max and sum are updated after every tile's exp has been issued, so
            # that VectorE does not wait for ScalarE in between
            new_max = nl.ndarray((P, g), nl.float32, buffer=nl.sbuf)
            neg_max = nl.ndarray((P, g), nl.float32, buffer=nl.sbuf)
            corr = nl.ndarray((P, g), nl.float32, buffer=nl.sbuf)
            blk_sum = nl.ndarray((P, g), nl.float32, buffer=nl.sbuf)
            p_sb = nl.ndarray((P, g, block), q.dtype, buffer=nl.sbuf)
            for j in nl.affine_range(g):
                blk_max = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
                nisa.tensor_reduce(dst=blk_max, op=nl.maximum, data=s_ps[:, j, :], axis=1)
                nisa.tensor_scalar(dst=new_max[:, j:j + 1], data=blk_max, op0=nl.multiply,
                                   operand0=scale, op1=nl.maximum, operand1=run_max[:, j:j + 1])
                nisa.tensor_scalar(dst=neg_max[:, j:j + 1], data=new_max[:, j:j + 1],
                                   op0=nl.multiply, operand0=-1.0)
                # correction = exp(old max - new max)
                nisa.activation(dst=corr[:, j:j + 1], op=nl.exp, data=run_max[:, j:j + 1],
                                bias=neg_max[:, j:j + 1])
                nisa.activation(dst=p_sb[:, j, :], op=nl.exp, data=s_ps[:, j, :],
                                bias=neg_max[:, j:j + 1], scale=scale, reduce_op=nl.add,
                                reduce_res=blk_sum[:, j:j + 1])
            nisa.tensor_copy(dst=run_max, src=new_max)
            nisa.tensor_tensor(dst=run_sum, data1=run_sum, data2=corr, op=nl.multiply)
            nisa.tensor_tensor(dst=run_sum, data1=run_sum, data2=blk_sum, op=nl.add)
            # probabilities transposed (TensorE, 4 x [128, 128] per tile), copied to SBUF
            # (ScalarE), times V (TensorE); the output rescaled and accumulated (VectorE)
            pt_ps = nl.ndarray((P, g, block // P, P), q.dtype, buffer=nl.psum)
            for j in nl.affine_range(g):
                for c in nl.affine_range(block // P):
                    nisa.nc_transpose(dst=pt_ps[:, j, c, :], data=p_sb[:, j, c * P:(c + 1) * P])
            pt = nl.ndarray((P, g, block // P, P), q.dtype, buffer=nl.sbuf)
            for j in nl.affine_range(g):
                nisa.tensor_copy(dst=pt[:, j], src=pt_ps[:, j], engine=nisa.scalar_engine)
            for j in nl.affine_range(g):
                pv = nl.ndarray((P, d), nl.float32, buffer=nl.psum)
                for c in nl.affine_range(block // P):
                    nisa.nc_matmul(dst=pv, stationary=pt[:, j, c, :], moving=v_sb[:, cur, c, :])
                nisa.scalar_tensor_tensor(dst=acc[:, j, :], data=acc[:, j, :], op0=nl.multiply,
                                          operand0=corr[:, j:j + 1], op1=nl.add, operand1=pv)
        inv = nl.ndarray((P, g), nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=run_sum)
        for j in nl.affine_range(g):
            o = nl.ndarray((P, d), q.dtype, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=o, data=acc[:, j, :], op0=nl.multiply,
                               operand0=inv[:, j:j + 1])
            q0 = (grp * g + j) * P
            nisa.dma_copy(dst=out[q0:q0 + P, :], src=o)
    return out
