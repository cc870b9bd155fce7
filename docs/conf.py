# Sphinx configuration of shoal's documentation: `make docs` builds it into docs/_build/html.
#
# Why Sphinx (with autodoc and myst-parser) rather than MkDocs + mkdocstrings:
# * it is the standard in the scientific Python ecosystem (NumPy, SciPy, mpi4py, Dask,
#   matplotlib document themselves with it), so its layout and cross-references are
#   what this project's users already know;
# * autodoc imports the package and reads the real signatures and docstrings (defaults
#   included: `shoal.pool.map(..., chunksize=1)` is rendered from the code, so the
#   reference cannot drift from it). The docstrings are prose in reStructuredText (no
#   napoleon: it would read a first line "Where the future was created: ..." of a
#   property as a type);
# * nitpicky mode (-n) turns every reference that does not resolve into a warning, and
#   the build runs with -W, so a renamed class or a stale :func: role fails the build;
# * myst-parser makes the existing Markdown pages (tutorial, feature guides, how-tos)
#   part of the same site, with working links between them and into the reference.
#
# The build imports shoal but runs no job: nothing here starts MPI or a PE.

from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # the working tree's shoal, also without an install

import shoal  # noqa: E402

project = "shoal"
author = "the shoal developers"
copyright = "the shoal developers"  # no year: the build is the same on any day
version = release = shoal.__version__

extensions = [
    "sphinx.ext.autodoc",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path: list[str] = []

# -- Markdown (myst-parser) -----------------------------------------------------------
# The pages link to sections of each other ("tutorial.md#starting-the-job-mid-script-
# shoalattach"): MyST makes those anchors from the headings, as GitHub does.
myst_heading_anchors = 4

# -- API reference (autodoc) ---------------------------------------------------------------
# The pages in api/ name each public object by its public name (shoal.Future, defined in
# shoal._runtime.futures): autodoc records the private path as the object's canonical
# name, so signatures that mention the private path link to the public entry.
autodoc_member_order = "bysource"
autodoc_preserve_defaults = True  # defaults as written in the code (`np.inf`, not 'inf')
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_class_signature = "mixed"
autodoc_inherit_docstrings = True

# -- Warnings: every one is an error (make docs runs sphinx-build -W -n --keep-going) -----
nitpicky = True
# Types from outside shoal that annotations name. The build is offline and deterministic,
# so there is no intersphinx to link them; they are the standard library's and NumPy's
# own names, not mistakes in shoal's docs. Everything else must resolve.
nitpick_ignore_regex = [
    # buffers and dtypes in signatures; `np.` where the annotation stays as written (the
    # runtime's modules import typing's names for type checkers only: a PE starts faster)
    ("py:class", r"(numpy|np)\.(ndarray|dtype)"),
    ("py:class", r"concurrent\.futures\..*"),  # Executor.submit's Future, BrokenPool's base
    ("py:class", r"collections\.abc\.Callable"),  # typing's names resolve; this one is abc's
    ("py:class", r"os\.PathLike"),  # checkpoint paths
    # Private names of shoal that public signatures mention; the docstring of each
    # function says what to pass:
    ("py:class", r"Placement"),  # Array(placement=): a function (index, num_pes) -> pe
    ("py:class", r"Strategy"),  # register_strategy(fn=): a function (loads, comm, placement, ...) -> placement
    ("py:class", r"shoal\._runtime\.strategies\.CommGraph"),  # what a strategy receives
    ("py:class", r"shoal\._runtime\.\w+\.F"),  # decorators' TypeVar: they return what they take
]
# The JSON example in benchmarks.md elides rows with "...": Pygments highlights it in
# its relaxed mode, which is what that block wants, but says so with a warning.
suppress_warnings = ["misc.highlighting_failure"]

# -- HTML ---------------------------------------------------------------------------------
html_theme = "alabaster"
html_title = f"shoal {release}"
html_theme_options = {"description": "Message-driven Python objects (chares) over MPI"}
html_last_updated_fmt = None  # no date in the pages: the same sources give the same site
html_show_sourcelink = False
smartquotes = False  # docstrings quote code ("auto", "c"): keep the quotes as written


# -- Links from the Markdown pages to folders of the repository ---------------------------
# "[examples/](../examples)" works on GitHub; the site has no page for a folder (links to a
# file, such as ../examples/hello.py, become downloads of it), so such a link is shown
# as its text.
class _FolderLinks(SphinxPostTransform):
    default_priority = 5  # before myst's resolver (9), which would warn about it

    def run(self, **kwargs):  # type: ignore[no-untyped-def]
        srcdir = Path(self.env.srcdir)
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("reftype") != "myst" or node.get("refdomain"):
                continue
            target = node["reftarget"].split("#")[0]
            doc = srcdir / self.env.doc2path(node["refdoc"], base=False)
            if target and (doc.parent / target).resolve().is_dir():
                node.replace_self(node.children or [nodes.literal(target, target)])


def setup(app):  # type: ignore[no-untyped-def]
    app.add_post_transform(_FolderLinks)
    return {"parallel_read_safe": True}
