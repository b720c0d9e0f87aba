"""What the render workers' zygote imports (``fetcher.crawl.WORKER_PRELOAD``): the reader,
with what it sets up on first use already set up.

Every page is rendered in a worker forked for it alone (``fetcher.isolation.zygote``), so what a
render loads on its first call (the Public Suffix List above all, about 80 ms) would be paid
by every page. Rendering one small page here, once, in the zygote, leaves it loaded
for every worker forked from it (shared copy-on-write).
"""

from __future__ import annotations

import gc

from fetcher.worktasks import Page, read_page

__all__ = ["warm"]

_WARM = Page(
    b"<title>warm</title><main><p>warm <a href='/a'>a</a></p></main>",
    "text/html",
    None,
    "https://example.com/",
    "example.com",
)


def warm() -> None:
    """Renders one small page of ours: in the zygote at import, and in each render worker
    forked ahead of its task, once confined (``fetcher.crawl.WORKER_WARM_UP``), so that
    its copy-on-write faults come before a read waits for it."""
    read_page(_WARM)


warm()

# Move everything loaded so far out of the collector's reach: a forked worker's collections
# would otherwise walk (and so copy) the forkserver's whole heap, page by page.
gc.freeze()
