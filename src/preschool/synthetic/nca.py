"""NCA: trajectories of random neural cellular automata, as 2x2 patch tokens with grid markers.

Follows Lee et al. 2026 (arXiv 2603.10055, danihyunlee/nca-pre-pretraining
``utils/nca.py`` + ``utils/tokenizers.py``) as re-implemented by verify-ppt
(``preprocessing/src/tokenize_nca.py``). Numpy, vectorised over the grid.

- grid ``grid x grid`` (12) with periodic boundary, ``n_states`` (10) states;
- rule: circular pad 1, 3x3 conv n_states -> 4, 1x1 conv 4 -> 16, ReLU,
  1x1 conv 16 -> n_states logits; LeCun-normal weights (std sqrt(1/fan_in)),
  zero biases, no nonlinearity between the first two convs (as the original);
- initial state: one random logit vector per trajectory, every cell sampled
  from its softmax; each step samples the next state from logits /
  ``temperature`` (1e-4, near argmax); ``warmup`` (10) steps are discarded,
  then every step is a frame;
- complexity filter: a candidate rule is rolled out from its own initial
  state for ``filter_steps`` (10) frames; the patch values (no markers) as
  ``compress_dtype`` bytes (``uint16``, verify-ppt; ``int32``, the original's
  token array) are compressed (``compressor``: ``zlib`` level 9, verify-ppt,
  or ``gzip`` level 9 with its header, the original) and the rule is kept
  only if ``band_lo <= compressed / raw <= band_hi`` (strict ``<`` with
  ``strict_bounds``, the original); each document then runs a fresh initial
  state under its own accepted rule;
- tokens, ``encoding="patch"`` (the paper): each 2x2 patch is
  ``sum(cell * n_states**pos)`` over row-major positions (0..9999), a frame is
  ``<grid>`` (n_states**4) + patches + ``</grid>`` (n_states**4 + 1):
  38 symbols for 12x12; ``length`` 1406 = 37 frames (verify-ppt).

Digit budget: patch values reach 9999 and the markers 10001, so in text
render a patch costs several BPE tokens and documents cannot fill a row
exactly. Use ``render=reserved`` (dedicated ids, the original setup), or
``encoding="split"``: each patch becomes two symbols, its top row
(``a + n*b``, 0..99) and bottom row (``n**2 + c + n*d``, 100..199), markers
200/201 — at most 3 digits, 74 symbols per 12x12 frame.

Departures: documents are cut to ``length`` symbols (the last frame may be
partial); the original masks the loss on the markers, verify-ppt does not
(``marker_loss=True``, default, trains every symbol).
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..config import check
from ..errors import DataError
from .base import GENERATORS, GENERATOR_PRESETS, Generator, GeneratorConfig, GeneratorPreset, Item, check_digits


@dataclass
class NCAConfig(GeneratorConfig):
    grid: int = 12
    patch: int = 2
    n_states: int = 10
    hidden: int = 16
    conv_channels: int = 4
    temperature: float = 1e-4
    warmup: int = 10
    filter_steps: int = 10
    compressor: Literal["zlib", "gzip"] = "zlib"
    compress_dtype: Literal["uint16", "int32"] = "uint16"  # bytes the filter compresses: verify-ppt / original
    band_lo: float = 0.5
    band_hi: float = 1.0
    strict_bounds: bool = False
    max_attempts: int = 1000  # candidate rules tried per document before giving up
    filter_batch: int = 4  # candidate rules rolled out together (speed; changes which rule is drawn)
    encoding: Literal["patch", "split"] = "patch"
    marker_loss: bool = True
    length: int = 1406  # symbols per document (37 frames of 38 for the defaults)
    max_digits: int = 0  # 0 = no text digit budget (patch ids reach 10001; see module doc)

    def validate(self) -> None:
        super().validate()
        check(self.patch == 2, "patch", f"only 2x2 patches are implemented, got {self.patch}")
        check(self.grid >= 2 and self.grid % self.patch == 0, "grid",
              f"must be a positive multiple of patch={self.patch}, got {self.grid}")
        check(2 <= self.n_states <= 16, "n_states", f"must be in [2, 16] (uint16 patch bytes), got {self.n_states}")
        check(self.compress_dtype in ("uint16", "int32"), "compress_dtype",
              f"must be 'uint16' (verify-ppt) or 'int32' (the original), got {self.compress_dtype!r}")
        check(self.hidden >= 1 and self.conv_channels >= 1, "hidden", "layer widths must be >= 1")
        check(self.temperature > 0, "temperature", f"must be > 0, got {self.temperature}")
        check(self.warmup >= 0, "warmup", f"must be >= 0, got {self.warmup}")
        check(self.filter_steps >= 1, "filter_steps", f"must be >= 1, got {self.filter_steps}")
        check(0.0 <= self.band_lo <= self.band_hi, "band_lo",
              f"must be in [0, band_hi={self.band_hi}], got {self.band_lo}")
        check(self.max_attempts >= 1, "max_attempts", f"must be >= 1, got {self.max_attempts}")
        check(self.filter_batch >= 1, "filter_batch", f"must be >= 1, got {self.filter_batch}")
        check(self.length >= 1, "length", f"must be >= 1, got {self.length}")
        n = self.n_states
        vocab = n ** 4 + 2 if self.encoding == "patch" else 2 * n * n + 2
        check_digits(self, vocab, "encoding")


@GENERATORS.register("nca", config=NCAConfig)
class NCA(Generator):
    """Neural cellular automata trajectories (Lee et al. 2026; verify-ppt), 2x2 patch tokens, rule complexity band."""

    cfg: NCAConfig

    def __init__(self, cfg: NCAConfig):
        super().__init__(cfg)
        n, g = cfg.n_states, cfg.grid
        self._pw = n ** np.arange(4)  # patch position weights, row-major
        # Flat-cell index tables: the 9 periodic neighbours of every cell (offset
        # order dy, dx in -1..1), and the 4 cells of every 2x2 patch (row-major).
        yy, xx = np.divmod(np.arange(g * g), g)
        self._base: dict[int, np.ndarray] = {}
        self._states = np.arange(n, dtype=np.int64)[None, :, None]
        self._w3_cache: tuple = (None, None)
        self._nbr = np.stack([((yy + dy) % g) * g + (xx + dx) % g for dy in (-1, 0, 1) for dx in (-1, 0, 1)])
        py, px = np.divmod(np.arange((g // 2) ** 2), g // 2)
        self._patch_cells = np.stack([(2 * py + a) * g + 2 * px + b for a in (0, 1) for b in (0, 1)], -1)
        self._oidx = np.arange(9)[None, :, None]
        self._n_patches = (g // 2) ** 2
        self._frame_len = 2 + self._n_patches * (1 if cfg.encoding == "patch" else 2)

    # -- vocabulary ---------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        n = self.cfg.n_states
        return n ** 4 + 2 if self.cfg.encoding == "patch" else 2 * n * n + 2

    @property
    def grid_open(self) -> int:
        return self.vocab_size - 2

    @property
    def grid_close(self) -> int:
        return self.vocab_size - 1

    @property
    def frame_len(self) -> int:
        return self._frame_len

    # -- dynamics -----------------------------------------------------------
    # Rules and states carry a leading batch axis B so the complexity filter can
    # roll out several candidate rules at once; a rule is (w1, w2, w3) with
    # w1 (B, 9, n_states, channels) indexed by neighbour offset and input state.
    def random_rules(self, rng: np.random.Generator, b: int):
        c = self.cfg
        n, h1, h2 = c.n_states, c.conv_channels, c.hidden
        # LeCun normal (fan_in = 3*3*n for the conv), zero biases; float32 like the original.
        w1 = rng.normal(0.0, np.sqrt(1.0 / (9 * n)), (b, 9, n, h1)).astype(np.float32)
        w2 = rng.normal(0.0, np.sqrt(1.0 / h1), (b, h1, h2)).astype(np.float32)
        w3 = rng.normal(0.0, np.sqrt(1.0 / h2), (b, h2, n)).astype(np.float32)
        return w1, w2, w3

    def logits(self, rule, state: np.ndarray) -> np.ndarray:
        """Next-state logits (B, n_states, cells) for flat integer states (B, cells).

        States-first layout: reductions over the states then run over contiguous
        (B, cells) slices, ~10x faster than over a short last axis.
        """
        w1, w2, w3 = rule
        b = len(state)
        base = self._base.get(b)
        if base is None:  # flat row of (rule, neighbour offset) in w1 viewed as (B*9*n, channels)
            base = self._base[b] = ((np.arange(b)[:, None, None] * 9 + np.arange(9)[None, :, None])
                                    * self.cfg.n_states).astype(np.int32)
        # One-hot input: the 3x3 conv is a table look-up per (rule, neighbour offset,
        # neighbour state), summed over the 9 offsets; one flat gather is fastest.
        flat = np.take(state, self._nbr, axis=1)
        flat += base
        h = np.take(w1.reshape(-1, w1.shape[-1]), flat, axis=0).sum(1)  # (B, cells, channels)
        return np.matmul(self._w3t(w3), np.maximum(h @ w2, 0.0).transpose(0, 2, 1))

    def _w3t(self, w3: np.ndarray) -> np.ndarray:
        if self._w3_cache[0] is not w3:
            self._w3_cache = (w3, np.ascontiguousarray(w3.transpose(0, 2, 1)))
        return self._w3_cache[1]

    def initial_states(self, rng: np.random.Generator, b: int) -> np.ndarray:
        c = self.cfg
        z = rng.normal(size=(b, 1, c.n_states))
        cdf = np.cumsum(np.exp(z - z.max(-1, keepdims=True)), -1)
        cdf /= cdf[..., -1:]
        u = rng.random((b, c.grid * c.grid, 1))
        return np.minimum((u > cdf).sum(-1), c.n_states - 1)  # categorical by inverse CDF

    def draw(self, rng: np.random.Generator, b: int, n_frames: int, rules=None):
        """All randomness of ``b`` trajectories: (rules, initial states, step uniforms).

        New rules are drawn unless ``rules`` is given. Drawing is separated from
        :meth:`simulate` so many items' trajectories can be simulated as one batch
        while each item still consumes only its own random stream, in a fixed order.
        """
        if rules is None:
            rules = self.random_rules(rng, b)
        s0 = self.initial_states(rng, b)
        steps = self.cfg.warmup + n_frames - 1
        # Each cell is sampled from softmax(logits / T) by inverse CDF: one uniform
        # per cell and step (Gumbel-max would need n_states each).
        u = rng.random((b, steps, self.cfg.grid * self.cfg.grid, 1), dtype=np.float32)
        return rules, s0, u

    def simulate(self, rules, s0: np.ndarray, u: np.ndarray, n_frames: int) -> np.ndarray:
        """(B, n_frames, cells) flat states after ``warmup`` discarded steps, dT = 1."""
        c = self.cfg
        b = len(s0)
        s = s0
        frames = np.empty((b, n_frames, c.grid * c.grid), np.int64)
        for t in range(c.warmup + n_frames - 1):
            if t >= c.warmup:
                frames[:, t - c.warmup] = s
            z = self.logits(rules, s)
            s = self.sample(z, u[:, t])
        frames[:, n_frames - 1] = s
        return frames

    def sample(self, z: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Next states from logits z (B, n, cells) and uniforms u (B, cells, 1).

        Categorical(softmax(z / T)) by inverse CDF, except that a cell whose best
        logit leads every other by >= 60 T takes the argmax directly (any other
        state has probability < e^-60 there); with T = 1e-4 that is nearly every
        cell, so the exp/cumsum runs only on the near-ties.
        """
        c = self.cfg
        zmax = z.max(1)
        close = z >= (zmax - np.float32(60.0 * c.temperature))[:, None]
        s = (close * self._states).sum(1)  # the argmax where it is the only close state
        tie = np.count_nonzero(close, axis=1) > 1
        if tie.any():
            zt = (z.transpose(0, 2, 1)[tie] - zmax[tie][:, None]) * np.float32(1.0 / c.temperature)
            np.maximum(zt, -60.0, out=zt)
            cdf = np.cumsum(np.exp(zt), -1)
            s[tie] = np.minimum((u[tie] * cdf[:, -1:] > cdf).sum(-1), c.n_states - 1)
        return s

    def rollout(self, rules, rng: np.random.Generator, n_frames: int) -> np.ndarray:
        """Draw and simulate ``len(rules[0])`` trajectories under ``rules``."""
        return self.simulate(*self.draw(rng, len(rules[0]), n_frames, rules), n_frames)

    def patch_values(self, frames: np.ndarray) -> np.ndarray:
        """(..., n_patches) base patch values sum(cell * n**pos) from flat (..., cells) states."""
        return frames[..., self._patch_cells] @ self._pw

    def ratio(self, frames: np.ndarray) -> float:
        raw = self.patch_values(frames).astype(self.cfg.compress_dtype).tobytes()
        if self.cfg.compressor == "zlib":
            comp = zlib.compress(raw, 9)
        else:
            comp = gzip.compress(raw, compresslevel=9, mtime=0)
        return len(comp) / len(raw)

    def in_band(self, r: float) -> bool:
        c = self.cfg
        if c.strict_bounds:
            return c.band_lo < r < c.band_hi
        return c.band_lo <= r <= c.band_hi

    def _filter(self, indices: list[int]):
        """Complexity filter for many items at once.

        Returns per item (rng positioned after the filter, accepted rule, ratio,
        attempts). Candidates come in rounds of ``filter_batch``; the first in
        band wins. All rounds of all items still pending are simulated together.
        """
        c = self.cfg
        rngs = [self.rng(i) for i in indices]
        result: list = [None] * len(indices)
        tried = [0] * len(indices)
        pending = list(range(len(indices)))
        while pending:
            draws, sizes = [], []
            for j in pending:
                b = min(c.filter_batch, c.max_attempts - tried[j])
                if b <= 0:
                    raise DataError(f"nca item {indices[j]}: no rule with compression ratio in the band "
                                    f"[{c.band_lo}, {c.band_hi}] after max_attempts={c.max_attempts}")
                draws.append(self.draw(rngs[j], b, c.filter_steps))
                sizes.append(b)
            rules = tuple(np.concatenate([d[0][w] for d in draws]) for w in range(3))
            frames = self.simulate(rules, np.concatenate([d[1] for d in draws]),
                                   np.concatenate([d[2] for d in draws]), c.filter_steps)
            still, off = [], 0
            for j, b in zip(pending, sizes):
                for q in range(b):
                    r = self.ratio(frames[off + q])
                    if self.in_band(r):
                        result[j] = (rngs[j], tuple(w[off + q: off + q + 1] for w in rules), r, tried[j] + q + 1)
                        break
                else:
                    still.append(j)
                tried[j] += b
                off += b
            pending = still
        return result

    def accepted_rule(self, index: int):
        """(rng positioned after the filter, rule, ratio, attempts) for item ``index``."""
        return self._filter([int(index)])[0]

    # -- tokens -------------------------------------------------------------
    def encode_frames(self, frames: np.ndarray) -> np.ndarray:
        """Flat states (T, cells) -> symbols: per frame <grid>, patch tokens, </grid>."""
        c = self.cfg
        n = c.n_states
        if c.encoding == "patch":
            body = self.patch_values(frames)
        else:
            cells = frames[..., self._patch_cells]  # (T, P, 4)
            top = cells[..., 0] + n * cells[..., 1]
            bottom = n * n + cells[..., 2] + n * cells[..., 3]
            body = np.stack([top, bottom], -1).reshape(len(frames), -1)
        T = len(frames)
        return np.concatenate([np.full((T, 1), self.grid_open), body, np.full((T, 1), self.grid_close)], 1).ravel()

    def decode_frames(self, symbols: np.ndarray) -> np.ndarray:
        """Complete frames back to flat (T, cells) states (inverse of encode_frames)."""
        c = self.cfg
        n, g = c.n_states, c.grid
        T = len(symbols) // self._frame_len
        body = symbols[: T * self._frame_len].reshape(T, self._frame_len)[:, 1:-1]
        if c.encoding == "patch":
            cells = (body[..., None] // self._pw) % n  # (T, P, 4)
        else:
            b = body.reshape(T, -1, 2)
            top, bot = b[..., 0], b[..., 1] - n * n
            cells = np.stack([top % n, top // n, bot % n, bot // n], -1)
        out = np.empty((T, g * g), np.int64)
        out[:, self._patch_cells] = cells
        return out

    def item(self, index: int) -> Item:
        return self.batch([index])[0]

    def items(self, start: int, stop: int):
        """Items ``start..stop-1``, simulated as one batch (identical to item() one by one)."""
        step = 64
        for a in range(start, stop, step):
            yield from self.batch(list(range(a, min(a + step, stop))))

    def batch(self, indices: list[int]) -> list[Item]:
        c = self.cfg
        n_frames = -(-c.length // self._frame_len)
        accepted = self._filter(indices)
        draws = [self.draw(rng, 1, n_frames, rule) for rng, rule, _, _ in accepted]
        frames = self.simulate(tuple(np.concatenate([d[0][w] for d in draws]) for w in range(3)),
                               np.concatenate([d[1] for d in draws]), np.concatenate([d[2] for d in draws]),
                               n_frames)
        out = []
        for j, index in enumerate(indices):
            sym = self.encode_frames(frames[j])[: c.length].astype(np.int64)
            mask = None
            if not c.marker_loss:
                mask = ((sym != self.grid_open) & (sym != self.grid_close)).astype(np.uint8)
            _, _, r, attempts = accepted[j]
            out.append(Item(sym, mask, {"index": int(index), "ratio": r, "attempts": attempts, "frames": n_frames}))
        return out

    def symbol_name(self, s: int) -> str:
        return {self.grid_open: "<grid>", self.grid_close: "</grid>"}.get(int(s), str(int(s)))

    def check(self, item: Item) -> None:
        c = self.cfg
        s = item.symbols
        assert len(s) == c.length, f"length {len(s)} != {c.length}"
        assert s.min() >= 0 and s.max() < self.vocab_size
        T = len(s) // self._frame_len
        for t in range(-(-len(s) // self._frame_len)):
            f = s[t * self._frame_len: (t + 1) * self._frame_len]
            assert f[0] == self.grid_open, f"frame {t}: <grid> expected"
            if len(f) == self._frame_len:
                assert f[-1] == self.grid_close, f"frame {t}: </grid> expected"
            body = f[1: self._frame_len - 1]
            assert not np.isin(body, [self.grid_open, self.grid_close]).any(), f"frame {t}: marker inside a frame"
        # The rule this document used passes the complexity filter...
        _, rule, r, attempts = self.accepted_rule(item.meta["index"])
        assert self.in_band(r) and abs(r - item.meta["ratio"]) < 1e-12 and attempts == item.meta["attempts"]
        # ...and the trajectory follows it: each frame is the (near-argmax) successor of the previous.
        frames = self.decode_frames(s)
        assert np.array_equal(self.encode_frames(frames), s[: T * self._frame_len]), "patch encoding not invertible"
        if T > 1:
            # Where the best logit leads the runner-up by >= 50 * temperature the
            # sample is the argmax (probability of anything else < e^-50); cells
            # near a tie (e.g. every hidden unit off, all logits 0) are random.
            z = self.logits(tuple(np.repeat(w, T - 1, 0) for w in rule), frames[:-1])
            top2 = np.sort(z, 1)[:, -2:]
            sure = (top2[:, 1] - top2[:, 0]) >= 50 * c.temperature
            follows = np.argmax(z, 1) == frames[1:]
            bad = sure & ~follows
            assert not bad.any(), f"frame {int(np.argwhere(bad)[0][0]) + 1}: a cell breaks the rule"
            assert sure.mean() > 0.5, "most cells should be decided by the rule"


GENERATOR_PRESETS.register("nca_verify_ppt")(GeneratorPreset(
    "nca", {"compressor": "zlib", "band_lo": 0.5, "band_hi": 1.0, "strict_bounds": False, "length": 1406},
    "verify-ppt NCA: zlib band [0.5, 1.0], 37 frames (1406 ids)"))
GENERATOR_PRESETS.register("nca_lee2026")(GeneratorPreset(
    "nca", {"compressor": "gzip", "compress_dtype": "int32", "band_lo": 0.5, "band_hi": 1.0, "strict_bounds": True,
     "marker_loss": False, "length": 1024},
    "Lee et al. 2026 original: gzip of int32 tokens, band (0.5, 1.0) strict, no marker loss, "
                "1024-symbol sequences (nca_prepretraining.sh)"))
GENERATOR_PRESETS.register("nca_text")(GeneratorPreset(
    "nca", {"encoding": "split", "max_digits": 3, "length": 1406},
    "NCA with the split (<=3-digit) encoding for text render"))
