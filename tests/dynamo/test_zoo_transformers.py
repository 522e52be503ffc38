"""Model zoo, transformer family: models written once the way a PyTorch user writes them (the
module code runs with both ``torch`` and ``ember`` as ``T``), checked four ways:

(a) ember eager == torch eager, forward and gradients (same seed: ember's init draws torch's
    weights); (b) ``ember.compile`` (inductor) forward, backward and an AdamW step == ember
    eager; (c) graph breaks (``ember.dynamo.explain``) no more than ``torch._dynamo.explain``'s,
    except where listed; (d) no recompile storm for new batch sizes / decoding positions.

ViT (conv and unfold patchify), a BERT-style nn.TransformerEncoder classifier with a padding
mask, a GPT with rotary embeddings, a tril-buffer causal mask, tied weights and a KV-cache
greedy decode, a top-k mixture-of-experts layer (nonzero: data-dependent graph breaks) with a
load-balancing loss, a T5 block (relative position buckets, hand-written RMSNorm) and a CLIP
contrastive loss."""
import math

import numpy as np
import pytest

import ember
from ember import dynamo

torch = pytest.importorskip("torch")


def build(T):
    nn = T.nn
    F = T.nn.functional

    class Attention(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            x = F.scaled_dot_product_attention(q, k, v)
            x = x.transpose(1, 2).reshape(B, N, C)
            return self.proj(x)

    class Block(nn.Module):
        def __init__(self, dim, heads, mlp_ratio=2.0):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.attn = Attention(dim, heads)
            self.norm2 = nn.LayerNorm(dim)
            hidden = int(dim * mlp_ratio)
            self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            x = x + self.mlp(self.norm2(x))
            return x

    class ViT(nn.Module):
        def __init__(self, img=16, patch=4, chans=3, dim=32, depth=2, heads=4, classes=10, conv=True):
            super().__init__()
            self.patch = patch
            self.conv = conv
            n = (img // patch) ** 2
            if conv:
                self.patch_embed = nn.Conv2d(chans, dim, kernel_size=patch, stride=patch)
            else:
                self.patch_embed = nn.Linear(chans * patch * patch, dim)
            self.cls_token = nn.Parameter(T.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(T.randn(1, n + 1, dim) * 0.02)
            self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, classes)

        def forward(self, x):
            B = x.shape[0]
            if self.conv:
                x = self.patch_embed(x).flatten(2).transpose(1, 2)
            else:
                p = self.patch
                x = x.unfold(2, p, p).unfold(3, p, p)  # B C h w p p
                x = x.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, x.shape[1] * p * p)
                x = self.patch_embed(x)
            cls = self.cls_token.expand(B, -1, -1)
            x = T.cat((cls, x), dim=1) + self.pos_embed
            for blk in self.blocks:
                x = blk(x)
            x = self.norm(x)
            return self.head(x[:, 0])

    class BertClassifier(nn.Module):
        def __init__(self, vocab=50, dim=32, heads=4, layers=2, max_len=16, classes=3):
            super().__init__()
            self.tok = nn.Embedding(vocab, dim, padding_idx=0)
            self.pos = nn.Embedding(max_len, dim)
            self.ln = nn.LayerNorm(dim)
            layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=64, dropout=0.0,
                                               activation="gelu", batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.pooler = nn.Linear(dim, dim)
            self.cls = nn.Linear(dim, classes)

        def forward(self, ids):
            pad = ids == 0
            pos = T.arange(ids.shape[1], device=ids.device).unsqueeze(0)
            h = self.ln(self.tok(ids) + self.pos(pos))
            h = self.encoder(h, src_key_padding_mask=pad)
            pooled = T.tanh(self.pooler(h[:, 0]))
            return self.cls(pooled)

    def rope_cache(seq, dim, base=10000.0):
        inv = 1.0 / (base ** (T.arange(0, dim, 2).float() / dim))
        t = T.arange(seq).float()
        freqs = T.outer(t, inv)
        return T.cos(freqs), T.sin(freqs)

    def apply_rope(x, cos, sin):
        # x: B H S D
        x1, x2 = x[..., ::2], x[..., 1::2]
        out1 = x1 * cos - x2 * sin
        out2 = x1 * sin + x2 * cos
        return T.stack((out1, out2), dim=-1).flatten(-2)

    class GPTAttention(nn.Module):
        def __init__(self, dim, heads, max_len):
            super().__init__()
            self.heads = heads
            self.hd = dim // heads
            self.c_attn = nn.Linear(dim, 3 * dim, bias=False)
            self.c_proj = nn.Linear(dim, dim, bias=False)
            self.register_buffer("mask", T.tril(T.ones(max_len, max_len)).view(1, 1, max_len, max_len))

        def forward(self, x, cos, sin, past=None):
            B, S, C = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, S, self.heads, self.hd).transpose(1, 2)
            k = k.view(B, S, self.heads, self.hd).transpose(1, 2)
            v = v.view(B, S, self.heads, self.hd).transpose(1, 2)
            q = apply_rope(q, cos, sin)
            k = apply_rope(k, cos, sin)
            if past is not None:
                pk, pv = past
                k = T.cat([pk, k], dim=2)
                v = T.cat([pv, v], dim=2)
            L = k.shape[2]
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
            att = att.masked_fill(self.mask[:, :, L - S:L, :L] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, S, C)
            return self.c_proj(y), (k, v)

    class GPTBlock(nn.Module):
        def __init__(self, dim, heads, max_len):
            super().__init__()
            self.ln_1 = nn.LayerNorm(dim)
            self.attn = GPTAttention(dim, heads, max_len)
            self.ln_2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * dim, dim))

        def forward(self, x, cos, sin, past=None):
            a, present = self.attn(self.ln_1(x), cos, sin, past)
            x = x + a
            x = x + self.mlp(self.ln_2(x))
            return x, present

    class GPT(nn.Module):
        def __init__(self, vocab=40, dim=32, heads=4, layers=2, max_len=32):
            super().__init__()
            self.wte = nn.Embedding(vocab, dim)
            self.blocks = nn.ModuleList([GPTBlock(dim, heads, max_len) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(dim)
            self.lm_head = nn.Linear(dim, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # weight tying
            cos, sin = rope_cache(max_len, dim // heads)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)

        def forward(self, idx, past=None, start=0):
            B, S = idx.shape
            x = self.wte(idx)
            cos = self.rope_cos[start:start + S]
            sin = self.rope_sin[start:start + S]
            presents = []
            for i, blk in enumerate(self.blocks):
                x, p = blk(x, cos, sin, None if past is None else past[i])
                presents.append(p)
            logits = self.lm_head(self.ln_f(x))
            return logits, presents

        def loss(self, idx, targets):
            logits, _ = self(idx)
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

        @T.no_grad()
        def generate(self, idx, steps):
            logits, past = self(idx)
            out = [idx]
            for _ in range(steps):
                nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                out.append(nxt)
                start = past[0][0].shape[2]
                logits, past = self(nxt, past, start)
            return T.cat(out, dim=1)

    class MoE(nn.Module):
        def __init__(self, dim=32, n_exp=4, k=2, hidden=48):
            super().__init__()
            self.n_exp = n_exp
            self.k = k
            self.router = nn.Linear(dim, n_exp, bias=False)
            self.experts = nn.ModuleList(
                [nn.Sequential(nn.Linear(dim, hidden), nn.SiLU(), nn.Linear(hidden, dim)) for _ in range(n_exp)])

        def forward(self, x):
            B, S, C = x.shape
            flat = x.reshape(-1, C)
            logits = self.router(flat)
            probs = F.softmax(logits, dim=-1)
            topv, topi = T.topk(logits, self.k, dim=-1)
            w = F.softmax(topv, dim=-1)
            out = T.zeros_like(flat)
            for e in range(self.n_exp):
                tok, slot = T.where(topi == e)
                if tok.numel() == 0:
                    continue
                y = self.experts[e](flat[tok]) * w[tok, slot].unsqueeze(-1)
                out.index_add_(0, tok, y)
            # switch-style load balancing loss
            onehot = F.one_hot(topi[:, 0], self.n_exp).float()
            frac = onehot.mean(0)
            pmean = probs.mean(0)
            aux = self.n_exp * (frac * pmean).sum()
            return out.reshape(B, S, C), aux

    class MoEModel(nn.Module):
        def __init__(self, dim=32):
            super().__init__()
            self.inp = nn.Linear(16, dim)
            self.moe = MoE(dim)
            self.head = nn.Linear(dim, 5)

        def forward(self, x):
            h = self.inp(x)
            m, aux = self.moe(h)
            return self.head(h + m).mean(1), aux

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(T.ones(dim))

        def forward(self, x):
            var = x.pow(2).mean(-1, keepdim=True)
            return self.weight * (x * T.rsqrt(var + self.eps))

    class T5Attention(nn.Module):
        def __init__(self, dim, heads, num_buckets=8, max_distance=16, bidirectional=True):
            super().__init__()
            self.heads = heads
            self.hd = dim // heads
            self.num_buckets = num_buckets
            self.max_distance = max_distance
            self.bidirectional = bidirectional
            self.q = nn.Linear(dim, dim, bias=False)
            self.k = nn.Linear(dim, dim, bias=False)
            self.v = nn.Linear(dim, dim, bias=False)
            self.o = nn.Linear(dim, dim, bias=False)
            self.relative_attention_bias = nn.Embedding(num_buckets, heads)

        @staticmethod
        def _bucket(rel, bidirectional, num_buckets, max_distance):
            ret = 0
            if bidirectional:
                num_buckets //= 2
                ret += (rel > 0).to(T.long) * num_buckets
                rel = T.abs(rel)
            else:
                rel = -T.min(rel, T.zeros_like(rel))
            max_exact = num_buckets // 2
            is_small = rel < max_exact
            large = max_exact + (
                T.log(rel.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
            ).to(T.long)
            large = T.min(large, T.full_like(large, num_buckets - 1))
            ret += T.where(is_small, rel, large)
            return ret

        def bias(self, q_len, k_len, device):
            ctx = T.arange(q_len, dtype=T.long, device=device)[:, None]
            mem = T.arange(k_len, dtype=T.long, device=device)[None, :]
            rel = mem - ctx
            b = self._bucket(rel, self.bidirectional, self.num_buckets, self.max_distance)
            vals = self.relative_attention_bias(b)  # q k h
            return vals.permute([2, 0, 1]).unsqueeze(0)

        def forward(self, x):
            B, S, C = x.shape
            q = self.q(x).view(B, S, self.heads, self.hd).transpose(1, 2)
            k = self.k(x).view(B, S, self.heads, self.hd).transpose(1, 2)
            v = self.v(x).view(B, S, self.heads, self.hd).transpose(1, 2)
            scores = T.matmul(q, k.transpose(3, 2)) + self.bias(S, S, x.device)
            attn = F.softmax(scores.float(), dim=-1).type_as(scores)
            out = T.matmul(attn, v).transpose(1, 2).contiguous().view(B, S, C)
            return self.o(out)

    class T5Block(nn.Module):
        def __init__(self, dim=32, heads=4, bidirectional=True):
            super().__init__()
            self.ln1 = RMSNorm(dim)
            self.attn = T5Attention(dim, heads, bidirectional=bidirectional)
            self.ln2 = RMSNorm(dim)
            self.wi = nn.Linear(dim, 64, bias=False)
            self.wo = nn.Linear(64, dim, bias=False)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            x = x + self.wo(F.relu(self.wi(self.ln2(x))))
            return x

    class CLIP(nn.Module):
        def __init__(self, img_dim=24, txt_vocab=30, dim=32, embed=16):
            super().__init__()
            self.img = nn.Sequential(nn.Linear(img_dim, dim), nn.GELU(), nn.Linear(dim, embed))
            self.tok = nn.Embedding(txt_vocab, dim)
            self.txt = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, embed))
            self.logit_scale = nn.Parameter(T.ones([]) * math.log(1 / 0.07))

        def forward(self, images, text):
            ie = F.normalize(self.img(images), dim=-1)
            te = F.normalize(self.txt(self.tok(text).mean(1)), dim=-1)
            scale = self.logit_scale.exp()
            logits_i = scale * ie @ te.t()
            logits_t = logits_i.t()
            labels = T.arange(images.shape[0], device=images.device)
            loss = (F.cross_entropy(logits_i, labels) + F.cross_entropy(logits_t, labels)) / 2
            return loss, logits_i

    return dict(ViT=ViT, BertClassifier=BertClassifier, GPT=GPT, MoEModel=MoEModel, T5Block=T5Block,
                CLIP=CLIP, RMSNorm=RMSNorm)


EM = build(ember)
TM = build(torch)
NAMES = ["ViT", "ViT_unfold", "BertClassifier", "GPT", "MoEModel", "T5Block", "CLIP"]


def _make(M, T, name, seed=0):
    T.manual_seed(seed)
    if name == "ViT_unfold":
        return M["ViT"](conv=False)
    return M[name]()


def _inputs(name, rng, B=2, S=8):
    """numpy arrays (float32 / int64) for the model's forward."""
    if name.startswith("ViT"):
        return [rng.standard_normal((B, 3, 16, 16)).astype(np.float32)]
    if name == "BertClassifier":
        ids = rng.integers(1, 50, (B, S))
        ids[0, -3:] = 0                     # padding in the first sequence
        return [ids]
    if name == "GPT":
        return [rng.integers(0, 40, (B, S))]
    if name == "MoEModel":
        return [rng.standard_normal((B, S, 16)).astype(np.float32)]
    if name == "T5Block":
        return [rng.standard_normal((B, S, 32)).astype(np.float32)]
    if name == "CLIP":
        return [rng.standard_normal((B, 24)).astype(np.float32), rng.integers(0, 30, (B, S))]
    raise KeyError(name)


def _loss(out):
    """A scalar from the model's output: the mean square of the first output plus any 0-d
    outputs (an aux loss, CLIP's loss)."""
    if isinstance(out, tuple):
        first = out[0]
        loss = first if first.dim() == 0 else first.float().pow(2).mean()
        for o in out[1:]:
            if hasattr(o, "dim") and o.dim() == 0:
                loss = loss + o
        return loss
    return out.pow(2).mean()


def _np(t):
    return t.detach().numpy()


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [x for y in o for x in _flat(y)]
    return [o]


@pytest.mark.parametrize("name", NAMES)
def test_eager_matches_torch(name):
    arrays = _inputs(name, np.random.default_rng(0))
    tm, em = _make(TM, torch, name), _make(EM, ember, name)
    for (n1, p1), (n2, p2) in zip(tm.state_dict().items(), em.state_dict().items()):
        assert n1 == n2
        np.testing.assert_array_equal(_np(p2), _np(p1), err_msg=f"init of {n1}")
    tl = _loss(tm(*[torch.tensor(a) for a in arrays]))
    tl.backward()
    el = _loss(em(*[ember.tensor(a) for a in arrays]))
    el.backward()
    np.testing.assert_allclose(float(el), float(tl), rtol=1e-5, atol=1e-6)
    tgrads = {n: p.grad for n, p in tm.named_parameters() if p.grad is not None}
    egrads = {n: p.grad for n, p in em.named_parameters() if p.grad is not None}
    assert sorted(egrads) == sorted(tgrads)
    for n in tgrads:
        np.testing.assert_allclose(_np(egrads[n]), _np(tgrads[n]), rtol=1e-4, atol=1e-5, err_msg=n)


def _train_step(m, f, args):
    opt = ember.optim.AdamW(m.parameters(), lr=1e-2)
    out = f(*args)
    _loss(out).backward()
    grads = {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}
    opt.step()
    opt.zero_grad()
    return out, grads, f(*args)


# inductor (the default backend) for two models; aot_eager (the same joint graphs, partition and
# runtime, without the C++ compile time) for the rest
_BACKENDS = [(n, "inductor" if n in ("ViT", "CLIP") else "aot_eager") for n in NAMES]


@pytest.mark.parametrize("name,backend", _BACKENDS)
def test_compiled_matches_eager(name, backend):
    """Compiled forward, gradients and the forward after one AdamW step equal eager's."""
    arrays = _inputs(name, np.random.default_rng(1))
    em, cm = _make(EM, ember, name), _make(EM, ember, name)
    e_out, e_grads, e_after = _train_step(em, em, [ember.tensor(a) for a in arrays])
    c_out, c_grads, c_after = _train_step(cm, ember.compile(cm, backend=backend),
                                          [ember.tensor(a) for a in arrays])
    for i, (a, b) in enumerate(zip(_flat(e_out) + _flat(e_after), _flat(c_out) + _flat(c_after))):
        np.testing.assert_allclose(_np(b), _np(a), rtol=1e-4, atol=1e-5, err_msg=f"output {i}")
    assert sorted(c_grads) == sorted(e_grads)
    for n in e_grads:
        np.testing.assert_allclose(_np(c_grads[n]), _np(e_grads[n]), rtol=1e-4, atol=1e-5, err_msg=n)
    assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons


@pytest.mark.parametrize("name", [n for n in NAMES if n != "MoEModel"])
def test_one_graph_like_torch(name):
    arrays = _inputs(name, np.random.default_rng(2))
    ex = dynamo.explain(_make(EM, ember, name))(*[ember.tensor(a) for a in arrays])
    torch._dynamo.reset()
    tx = torch._dynamo.explain(_make(TM, torch, name))(*[torch.tensor(a) for a in arrays])
    torch._dynamo.reset()
    assert (tx.graph_count, tx.graph_break_count) == (1, 0)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0), ex.break_reasons


def test_moe_breaks_only_at_nonzero():
    """torch breaks at ``torch.where(cond)`` (nonzero: a data-dependent shape) and only there;
    so does ember. ``out`` (requiring grad, not a leaf after the first expert's ``index_add_``)
    reaches the resume functions as a graph input and its in-place update is captured there
    (``tests/aot/test_nonleaf_inplace_inputs.py``); the result equals eager's
    (test_compiled_matches_eager). The graph counts differ by design: torch gives up on a graph
    break inside a loop ("graph break in loop") and runs the whole ``MoE.forward`` frame eagerly,
    while ember resumes inside the loop, one graph per expert."""
    arrays = _inputs("MoEModel", np.random.default_rng(3))
    ex = dynamo.explain(_make(EM, ember, "MoEModel"))(*[ember.tensor(a) for a in arrays])
    torch._dynamo.reset()
    tx = torch._dynamo.explain(_make(TM, torch, "MoEModel"))(*[torch.tensor(a) for a in arrays])
    torch._dynamo.reset()
    for r in tx.break_reasons:
        assert "nonzero" in r.reason and "T.where(topi == e)" in r.user_stack[-1].line, r.reason
    for where, reason, src in ex.break_reasons:
        assert "nonzero" in reason and "T.where(topi == e)" in src, (where, reason, src)
    n_exp = EM["MoEModel"]().moe.n_exp
    # torch: the graphs before and after the MoE call (one break: at its first nonzero); ember:
    # those, MoE.forward up to its first nonzero, then each expert's resume function (its
    # index_add_ into ``out`` included) up to the next one or the end
    assert (tx.graph_count, tx.graph_break_count) == (2, 1)
    assert (ex.graph_count, ex.graph_break_count) == (tx.graph_count + 1 + n_exp, tx.graph_break_count + n_exp)
    assert sum("index_add_" in g.code for g in ex.graphs) == n_exp
    assert dynamo.counters["internal_errors"] == 0, dynamo.fallback_reasons


class _Count:
    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


def test_new_batch_sizes_do_not_recompile_each_time():
    m = _make(EM, ember, "ViT")
    cnt = _Count()
    cm = ember.compile(m, backend=cnt)
    with ember.no_grad():
        for b in (2, 3, 4, 5):
            x = ember.randn(b, 3, 16, 16)
            np.testing.assert_allclose(_np(cm(x)), _np(m(x)), rtol=1e-5, atol=1e-5)
    assert cnt.graphs == 2        # the first size, then one with a symbolic batch


def test_kv_cache_decoding_compiles_a_bounded_number_of_graphs():
    """The decode step ``model(next_token, past, start)`` with a growing cache and position:
    the prefill, the first step, then one symbolic entry (positions are symbolic sizes)."""
    m = _make(EM, ember, "GPT")
    idx = ember.tensor(_inputs("GPT", np.random.default_rng(4), S=5)[0])
    want = m.generate(idx, 6)
    cnt = _Count()
    cm = ember.compile(m, backend=cnt)
    with ember.no_grad():
        logits, past = cm(idx)
        out = [idx]
        for _ in range(6):
            nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            out.append(nxt)
            logits, past = cm(nxt, past, past[0][0].shape[2])
    assert ember.equal(ember.cat(out, 1), want)
    assert cnt.graphs <= 3, cnt.graphs


def test_compiled_generate_matches_eager():
    m = _make(EM, ember, "GPT")
    idx = ember.tensor(_inputs("GPT", np.random.default_rng(5), S=4)[0])
    want = m.generate(idx, 5)
    got = ember.compile(m.generate, backend="eager")(idx, 5)
    assert ember.equal(got, want)
