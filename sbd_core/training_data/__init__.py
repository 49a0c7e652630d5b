"""The paper's fine-tuning mix as a cached stage output: sources (sources.py), fetch / build / load (build.py)."""

from .build import MixSpec, build, check_packed, fetch, load_packed, select_documents
from .sources import SOURCES, Source, get_source

__all__ = ["MixSpec", "build", "check_packed", "fetch", "load_packed", "select_documents", "SOURCES", "Source", "get_source"]
