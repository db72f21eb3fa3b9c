"""The pages a benchmark web serves: the shared corpus, or a tuning set and a judging set kept apart.

- `corpus`: the real article pages of the shared corpus (`corpus/pages/`: 60, 28 KB to 1 MB), else 40
  generated articles; the web cycles through them, so pages repeat.
- `tune`: the corpus pages at even positions (30) and generated pages, seed 1, up to the web's
  number of unique pages: what changes are tried on.
- `judge`: the corpus pages at odd positions (the other 30) and generated pages, seed 2, with
  layouts the tuning set never has (`_JUDGE_ONLY`): what changes are judged on, never tuned on.
- `held`: pages no change was tried on: the corpus pages at odd positions, pages made of the real
  text of the validity sets beside the corpus (`validity/`: SummEdits documents, news,
  meeting and call transcripts, e-mails, abstracts; WiCE's cited web-page sentences) in the
  layouts of article pages, and generated pages, seed 3, of every layout.

Generated pages vary in size and structure the way the web does: small stubs and briefs of a few
KB, medium articles, and large pages (long reads, tables of thousands of cells, forum threads,
pages that are mostly inline scripts and JSON, deep `div` nesting), from about 1 KB to 1.1 MB.
Every generated page is distinct (its index is in its title and first paragraph).
"""

from __future__ import annotations

import gzip
import html
import json
import random
from collections.abc import Callable
from pathlib import Path

from _common import CORPUS_PAGES

PAGE_SETS = ("corpus", "tune", "judge", "held")
WORDS = ["market", "policy", "energy", "climate", "court", "science", "health", "vote", "budget", "city",
         "water", "trade", "school", "research", "report", "study", "data", "growth", "council", "river",
         "the", "of", "and", "to", "in", "a", "is", "that", "for", "on", "with", "as", "was", "by"]


def corpus_files(corpus: Path) -> list[Path]:
    folder = corpus / "html"
    return sorted(folder.glob("*.html.gz")) if folder.is_dir() else []


def bodies(pageset: str = "corpus", count: int = 0) -> tuple[list[bytes], str]:
    """The HTML bodies a benchmark web serves: page set `pageset` of the shared corpus (or generated pages)."""
    return load(pageset, CORPUS_PAGES, count)


def load(name: str, corpus: Path, count: int) -> tuple[list[bytes], str]:
    """The bodies of page set `name` (`count`: the web's unique pages) and a line saying what they are."""
    files = corpus_files(corpus)
    if name == "corpus":
        if files:
            return [gzip.decompress(f.read_bytes()) for f in files], f"{len(files)} real pages from {corpus}"
        rng = random.Random(7)
        return [_article(rng, n, 25) for n in range(40)], "40 generated pages (shared corpus not found)"
    real = [gzip.decompress(f.read_bytes()) for f in files[(0 if name == "tune" else 1)::2]]
    seed, layouts = {"tune": (1, _LAYOUTS), "judge": (2, _LAYOUTS + _JUDGE_ONLY),
                     "held": (3, _LAYOUTS + _JUDGE_ONLY)}[name]
    rng = random.Random(seed)
    if name == "held":
        texts = validity_texts(corpus.parent.parent / "validity")
        wanted = max(0, (count - len(real)) // 3)  # a third of the rest: real text; the others generated
        real += [text_page(rng, len(real) + n, text) for n, text in enumerate(texts[:wanted])]
    made = [_generated(rng, n, layouts) for n in range(max(0, count - len(real)))]
    bodies = real + made
    rng.shuffle(bodies)
    sizes = sorted(len(b) for b in bodies)
    return bodies, (f"set '{name}': {len(real)} real pages + {len(made)} generated, "
                    f"{sizes[0] / 1e3:.0f} KB-{sizes[-1] / 1e6:.1f} MB, median {sizes[len(sizes) // 2] / 1e3:.0f} KB")


def validity_texts(folder: Path) -> list[str]:
    """Real documents of the validity sets, shuffled (seeded): SummEdits documents and, per WiCE
    claim, the sentences of the page it cites; [] when the folder is missing."""
    texts: set[str] = set()
    for path in sorted((folder / "summedits").glob("*.json.gz")):
        texts.update(item["doc"] for item in json.loads(gzip.decompress(path.read_bytes())))
    wice = folder / "wice" / "dev.jsonl.gz"
    if wice.is_file():
        claims: dict[str, list[str]] = {}
        for line in gzip.decompress(wice.read_bytes()).splitlines():
            row = json.loads(line)
            claims.setdefault(row["meta"]["id"], []).extend(row["evidence"])
        texts.update("\n".join(dict.fromkeys(sentences)) for sentences in claims.values())
    ordered = sorted(texts)
    random.Random(3).shuffle(ordered)
    return ordered


def text_page(rng: random.Random, n: int, text: str) -> bytes:
    """A real document as an article page: its lines as paragraphs, among a site's usual boilerplate."""
    lines = [line.strip() for line in text.replace("\r", "").split("\n") if line.strip()]
    if len(lines) < 3:  # one block of text: paragraphs of a few sentences
        sentences = text.replace(". ", ".\n").split("\n")
        lines = [" ".join(sentences[i:i + 4]) for i in range(0, len(sentences), 4)]
    body = "".join(f"<p>{html.escape(line)}</p>" for line in lines)
    aside = "".join(f"<li><a href='/r/{i}'>{_words(rng, 5)}</a></li>" for i in range(rng.randint(3, 15)))
    return _page(n, html.escape(lines[0][:60]), f"<main><article><h1>{html.escape(lines[0][:80])}</h1>{body}"
                 f"</article><aside><h2>Related</h2><ul>{aside}</ul></aside></main>")


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _page(n: int, head: str, body: str) -> bytes:
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Page {n}: {head}</title>"
            f"<meta property='og:title' content='{head}'></head><body>"
            "<header><nav><ul>" + "".join(f"<li><a href='/s{i}'>Section {i}</a></li>" for i in range(12))
            + f"</ul></nav></header>{body}<footer><p>(c) Site {n}</p></footer></body></html>").encode()


def _article(rng: random.Random, n: int, paragraphs: int) -> bytes:
    text = "".join(f"<p>{_words(rng, rng.randint(30, 90))}.</p>" for _ in range(paragraphs))
    return _page(n, "Article", f"<main><article><h1>Article {n}</h1><p>Page {n}.</p>{text}</article></main>")


def _listing(rng: random.Random, n: int, items: int) -> bytes:
    rows = "".join(f"<li class='teaser'><a href='/a/{i}'><h3>{_words(rng, 6)}</h3></a><p>{_words(rng, 20)}</p></li>"
                   for i in range(items))
    return _page(n, "Latest", f"<main><h1>Latest {n}</h1><ul class='list'>{rows}</ul></main>")


def _table(rng: random.Random, n: int, rows: int) -> bytes:
    cells = "".join("<tr>" + "".join(f"<td>{rng.randint(0, 10**6)}</td>" for _ in range(8)) + "</tr>"
                    for _ in range(rows))
    return _page(n, "Figures", f"<main><article><h1>Figures {n}</h1><p>{_words(rng, 80)}.</p>"
                 f"<table><tr>{'<th>col</th>' * 8}</tr>{cells}</table></article></main>")


def _forum(rng: random.Random, n: int, posts: int) -> bytes:
    thread = "".join(f"<div class='post' id='p{i}'><div class='author'>user{rng.randint(1, 999)}</div>"
                     f"<div class='content'><p>{_words(rng, rng.randint(10, 120))}</p></div>"
                     f"<div class='actions'><a href='#r{i}'>Reply</a> <a href='#q{i}'>Quote</a></div></div>"
                     for i in range(posts))
    return _page(n, "Thread", f"<main><h1>Thread {n}</h1><div class='thread'>{thread}</div></main>")


def _scripted(rng: random.Random, n: int, kilobytes: int) -> bytes:
    state = "{" + ",".join(f'"k{i}":"{_words(rng, 8)}"' for i in range(kilobytes * 16)) + "}"
    script = f"<script>window.__STATE__={state};</script><style>{'.c{color:red}' * kilobytes * 40}</style>"
    return _page(n, "App", f"{script}<main><article><h1>App page {n}</h1>"
                 + "".join(f"<p>{_words(rng, 50)}.</p>" for _ in range(6)) + "</article></main>")


def _nested(rng: random.Random, n: int, depth: int) -> bytes:
    inner = f"<p>{_words(rng, 60)}.</p>"
    for level in range(depth):
        inner = f"<div class='wrap l{level}'><span>{_words(rng, 3)}</span>{inner}<p>{_words(rng, 25)}.</p></div>"
    return _page(n, "Nested", f"<main>{inner}</main>")


def _stub(rng: random.Random, n: int, _size: int) -> bytes:
    return _page(n, "Brief", f"<main><p>{_words(rng, rng.randint(5, 40))}.</p></main>")


Layout = tuple[Callable[[random.Random, int, int], bytes], tuple[int, int, int]]
# Each layout and its size knob for a small, a medium and a large page.
_LAYOUTS: tuple[Layout, ...] = (
    (_article, (4, 30, 600)),
    (_listing, (10, 60, 400)),
    (_table, (20, 100, 500)),
    (_forum, (5, 40, 300)),
    (_stub, (0, 0, 0)),
)
_JUDGE_ONLY: tuple[Layout, ...] = (
    (_scripted, (4, 60, 800)),
    (_nested, (10, 60, 250)),
)


def _generated(rng: random.Random, n: int, layouts: tuple[Layout, ...]) -> bytes:
    make, knobs = rng.choice(layouts)
    size = knobs[rng.choices((0, 1, 2), (0.45, 0.45, 0.1))[0]]
    return make(rng, n, size)
