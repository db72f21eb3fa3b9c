"""One frozen `Settings` object: the CLI builds it from flags, the library takes it as an argument."""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

__all__ = ["ExtractorName", "PageSourceName", "Settings", "UrlPolicy", "default_cache_dir"]

UrlPolicy = Literal["cited", "sources", "all"]
PageSourceName = Literal["fetch", "chat", "chat:always"]
"""Where pages come from: `fetch` the cache, the web and the archive; `chat` those, then a model for what
they could not give; `chat:always` a model for every page (the web is not fetched)."""
ExtractorName = Literal["recall", "balanced", "precision", "resiliparse"]
"""How an HTML page's main text is found: trafilatura favouring recall (the default), balanced, or favouring
precision; or resiliparse's main-content extraction (the `resiliparse` extra). docs/fetching.md compares them."""


def default_cache_dir() -> Path:
    """Where pages are cached when neither `--cache-dir` nor `TLMSCORE_CACHE_DIR` says otherwise."""
    env = os.environ.get("TLMSCORE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME")
    root = Path(base).expanduser() if base else Path.home() / ".cache"
    return root / "tlmscore"


class Settings(BaseModel):
    """Everything a run can be told, in one immutable value.

    Each stage reads the fields it needs; nothing reads the environment after this is built.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cache_dir: Path = Field(default_factory=default_cache_dir)
    offline: bool = False
    urls: UrlPolicy = "cited"
    allow_hosts: frozenset[str] = frozenset()
    page_files: tuple[Path, ...] = Field(
        default=(), description="JSONL files of page records served before the cache and the network")
    batch_inputs: tuple[Path, ...] = Field(
        default=(), description="OpenAI Batch API input files joined to output lines by custom_id")
    hydrate: bool = Field(
        default=False, description="fill in records holding only a response_id from the stored responses")
    input_format: str | None = Field(
        default=None, description="the source reader of every input (see tlmscore.sources); None: by content")

    concurrency: int = Field(default=32, ge=1, le=1024)
    per_host: int = Field(default=6, ge=1, le=256)
    timeout: float = Field(default=20.0, gt=0)
    connect_timeout: float = Field(default=10.0, gt=0)
    retries: int = Field(default=2, ge=0, le=10)
    retry_after_cap: float = Field(default=30.0, ge=0)
    max_redirects: int = Field(default=5, ge=0, le=30)
    proxy: str | None = Field(default=None, description="an http(s) proxy for every fetch, e.g. http://proxy:3128")
    trust_env: bool = Field(default=False, description="use HTTPS_PROXY, HTTP_PROXY, NO_PROXY from the environment")
    ca_bundle: Path | None = Field(default=None, description="PEM file of the only authorities TLS trusts")
    trust_store: Literal["system", "certifi"] = Field(
        default="system", description="system: the OS store (truststore); certifi: Mozilla's list")
    max_bytes: int = Field(default=5_000_000, ge=1)
    cache_max_age: float = Field(default=30 * 86400.0, gt=0, description="seconds a fetched page stays fresh")
    failure_ttl: float = Field(default=3600.0, ge=0, description="seconds a failed fetch is remembered")
    extract_workers: int | None = Field(default=None, ge=1, description="None: one per core")
    archive: Literal["off", "fallback", "prefer"] = Field(
        default="off", description="read pages from a web archive as of the answer (sends cited URLs to it)")
    archive_url: str = Field(default="https://web.archive.org", description="a Wayback-compatible archive")
    extract_timeout: float = Field(default=30.0, gt=0, description="CPU seconds one page's extraction may take")
    extractor: ExtractorName = Field(
        default="recall", description="how a page's main text is found: trafilatura favouring recall, balanced or "
                                      "favouring precision, or resiliparse (the resiliparse extra); docs/fetching.md")
    extract_memory: int = Field(default=384 * 2**20, ge=2**20,
                                description="bytes an extraction worker may allocate beyond its start")

    page_source: PageSourceName = Field(
        default="fetch", description="fetch: the cache, the web and the archive; chat: those, then a model reads "
                                     "the pages they could not give; chat:always: a model reads every page")
    page_base_url: str | None = Field(default=None, description="the page model's OpenAI-compatible API root")
    page_model: str | None = Field(default=None, description="the page model's name at page_base_url")
    page_api_key_env: str | None = Field(
        default=None, description="environment variable holding the page model's key (None: no key is sent)")
    page_concurrency: int = Field(default=4, ge=1, le=256, description="requests to the page model in flight")
    page_timeout: float = Field(default=120.0, gt=0, description="seconds one request to the page model may take")
    page_max_tokens: int = Field(default=1024, ge=16, le=32768, description="tokens of one page's summary, at most")
    page_price_in: float | None = Field(default=None, ge=0, description="page model: dollars per million input tokens")
    page_price_out: float | None = Field(default=None, ge=0,
                                         description="page model: dollars per million output tokens")
    page_price_request: float | None = Field(default=None, ge=0,
                                             description="page model: dollars per request (a provider's search fee)")
    page_max_cost: float | None = Field(default=None, ge=0, description="refuse to send page model requests "
                                                                        "estimated to cost more dollars than this")

    page_chars: int = Field(default=50_000, ge=100)
    evidence_chars: int = Field(default=200_000, ge=100)

    reasoning: Literal["skip", "summary"] = "skip"
    think: Literal["remove", "keep"] = Field(
        default="remove", description="`<think>` reasoning in answer text: removed (with a warning) or kept as text")
    ascii_json: bool = Field(
        default=False, description="escape non-ASCII in JSON blocks as cleanlab-tlm does (tlmscore.compat sets it)")
    progress: bool | None = Field(default=None, description="None: only on a terminal")
    chunk_size: int = Field(default=1000, ge=1)
    score_workers: int | None = Field(
        default=None, ge=1, description="processes a CPU-bound scorer (grounding) runs in; None: one per core, "
                                        "1: in the run's own process")

    @field_validator("proxy", "archive_url", "page_base_url")
    @classmethod
    def _http_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and not value.lower().startswith(("http://", "https://")):
            raise ValueError(f"{_URLS[info.field_name or '']} must be an http:// or https:// URL, not {value!r}")
        return value

    @model_validator(mode="after")
    def _page_model_named(self) -> Settings:
        if self.page_source != "fetch" and not (self.page_base_url and self.page_model):
            raise ValueError(f"page_source {self.page_source!r} needs page_base_url and page_model "
                             "(--page-base-url URL --page-model NAME)")
        return self

    @field_validator("allow_hosts", mode="before")
    @classmethod
    def _lower_hosts(cls, value: object) -> object:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, (list, tuple, set, frozenset)):
            return frozenset(str(v).strip().lower().rstrip(".") for v in value if str(v).strip())
        return value

    @field_validator("allow_hosts")
    @classmethod
    def _hosts_only(cls, value: frozenset[str]) -> frozenset[str]:
        """Each entry is a host name or an IP address: a URL, a port or a network would never match a page."""
        for host in sorted(value):
            if not (_HOST_NAME.fullmatch(host) or _is_ip(host)):
                raise ValueError(f"{host!r} is not a host name or IP address (give the host alone, as 127.0.0.1 "
                                 "or wiki.corp.example: no scheme, port, path or network)")
        return value


_URLS = {"proxy": "the proxy", "archive_url": "the archive", "page_base_url": "the page model's base URL"}
"""What an error calls each URL setting."""
_HOST_NAME = re.compile(r"[\w-]+(\.[\w-]+)*")
"""A host name as a URL writes it (letters of any script, digits, `-`, `_`), dot-separated."""


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return False
    return True
