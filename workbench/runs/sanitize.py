"""What a page shows of a notebook's outputs and markdown when it is not trusted (``python -m workbench export``
without ``--trusted``; the runner's pages alike).

* **HTML** (output ``text/html``, markdown cells and ``text/markdown`` outputs once rendered, raw cells, the
  highlighted code) goes through nh3 (the ammonia sanitiser) with an allow-list: no script, style, iframe,
  object, embed, form or SVG element (their content goes too), no event handler, no ``javascript:`` or
  ``data:`` link, no image from the network (a page opens offline and asks no server for anything), CSS
  properties that cannot load a URL only. Tables, headings with their anchors, links, code and images embedded
  in the notebook stay.
* **Plotly figures** are drawn from their data (``application/vnd.plotly.v1+json``), never from the notebook's
  HTML: :func:`figure_html` writes the ``Plotly.newPlot`` call itself, plotly.io escaping the JSON for a
  ``<script>``. A figure's HTML as plotly.io writes it (the workbench's live slider panels carry only that) is
  read back into its data by :func:`figure_from_html`, so the workbench's own figures keep working.
"""

from __future__ import annotations

import json
import re
from typing import Any

PLOTLY_MIME = "application/vnd.plotly.v1+json"
# elements removed with everything inside them (their text is code, CSS or a document of its own)
REMOVED_WITH_CONTENT = {
    "script",
    "style",
    "template",
    "noscript",
    "iframe",
    "frame",
    "frameset",
    "object",
    "embed",
    "applet",
    "svg",
    "math",
    "textarea",
    "select",
    "title",
}
HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
# CSS properties that set colours, alignment, type and box sizes; none of them takes a url()
STYLE_PROPERTIES = {
    "color",
    "background-color",
    "text-align",
    "vertical-align",
    "font-weight",
    "font-style",
    "font-size",
    "font-family",
    "text-decoration",
    "white-space",
    "width",
    "min-width",
    "max-width",
    "height",
    "padding",
    "padding-left",
    "padding-right",
    "padding-top",
    "padding-bottom",
    "margin",
    "margin-left",
    "margin-right",
    "margin-top",
    "margin-bottom",
    "border",
    "border-color",
    "border-width",
    "border-style",
    "border-collapse",
    "border-left",
    "border-right",
    "border-top",
    "border-bottom",
}
_EMBEDDED_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml)[;,]", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def _allowed_attributes() -> dict[str, set[str]]:
    import nh3

    attributes = {tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()}
    attributes["*"] = {"class", "title", "lang", "dir", "style"}
    for heading in HEADINGS:  # nbconvert's heading anchors: <h2 id="..."> and <a class="anchor-link" href="#...">
        attributes[heading] = attributes.get(heading, set()) | {"id"}
    return attributes


def _url_filter(tag: str, attribute: str, value: str) -> str | None:
    """Keep a URL a reader may follow or an image the notebook embeds; drop ``data:`` links and network images."""
    url = re.sub(r"[\x00-\x20]", "", value).lower()  # what a browser's URL parser reads
    if attribute == "src":
        if url.startswith("data:"):
            return value if _EMBEDDED_IMAGE.match(url) else None
        return None if url.startswith("//") or _SCHEME.match(url) else value  # a relative path: a local file
    if attribute in ("href", "cite") and url.startswith("data:"):
        return None
    return value


def clean_html(html: Any) -> str:
    """``html`` (a fragment) with only the allowed elements, attributes, URLs and CSS left (nbconvert's
    ``clean_html`` filter: the page's template applies it to outputs, markdown, raw cells and code)."""
    import nh3

    text = html.decode() if isinstance(html, bytes) else str(html)
    return nh3.clean(
        text,
        tags=set(nh3.ALLOWED_TAGS),
        clean_content_tags=REMOVED_WITH_CONTENT,
        attributes=_allowed_attributes(),
        attribute_filter=_url_filter,
        url_schemes={"http", "https", "mailto", "data"},
        filter_style_properties=STYLE_PROPERTIES,
        strip_comments=True,
    )


def _size(value: Any) -> float | None:
    """A width or height plotly.io writes into the figure's ``style`` attribute: a number, else nothing."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _embedded(image: Any) -> bool:
    """Whether a plotly layout image is embedded in the figure (a ``data:`` image), not fetched."""
    source = image.get("source") if isinstance(image, dict) else None
    return isinstance(source, str) and _EMBEDDED_IMAGE.match(re.sub(r"[\x00-\x20]", "", source)) is not None


def offline_figure(bundle: Any) -> dict[str, Any]:
    """The ``data``, ``layout`` and ``frames`` of a plotly figure (a MIME bundle or a saved figure's JSON) that a page
    may draw offline: layout images from the network left out, a width or height that is not a number dropped (it is
    written into a style attribute), a template that is not a mapping dropped; the figure's config is not used. (Map
    and geo traces still fetch their base maps, as plotly.js does.)"""
    bundle = bundle if isinstance(bundle, dict) else {}
    data = bundle.get("data") if isinstance(bundle.get("data"), list) else []
    layout = dict(bundle.get("layout")) if isinstance(bundle.get("layout"), dict) else {}
    for key in ("width", "height"):  # written unescaped into a style attribute
        if key in layout and _size(layout[key]) is None:
            del layout[key]
    if isinstance(layout.get("images"), list):  # a layout image from the network is a request the page makes
        layout["images"] = [image for image in layout["images"] if _embedded(image)]
    template = layout.get("template")
    if template is not None and not isinstance(template, dict):
        del layout["template"]
    elif isinstance(template, dict) and isinstance(template.get("layout"), dict):
        template_layout = dict(template["layout"])
        for key in ("width", "height"):
            if key in template_layout and _size(template_layout[key]) is None:
                del template_layout[key]
        layout["template"] = {**template, "layout": template_layout}
    figure = {"data": data, "layout": layout}
    if isinstance(bundle.get("frames"), list):
        figure["frames"] = bundle["frames"]
    return figure


def figure_html(bundle: Any) -> str:
    """The ``div`` and ``Plotly.newPlot`` call of a plotly MIME bundle's :func:`offline_figure`, as the workbench's
    renderer writes them for a page that loads plotly.js."""
    import plotly.io as pio

    options = {"include_plotlyjs": False, "include_mathjax": False, "full_html": False, "validate": False}
    return pio.to_html(offline_figure(bundle), default_width="100%", default_height=525, **options)


_NEW_PLOT = re.compile(r"Plotly\.newPlot\(\s*\"[^\"]*\"\s*,")


def figure_from_html(html: str) -> dict[str, Any] | None:
    """The data and layout of the first ``Plotly.newPlot("id", data, layout, ...)`` call in ``html`` (as plotly.io
    writes it: both JSON), or None. Only JSON is read: nothing of the HTML itself reaches the page."""
    match = _NEW_PLOT.search(html)
    if match is None:
        return None
    decoder = json.JSONDecoder()
    values = []
    position = match.end()
    try:
        for _ in range(2):
            position = len(html) - len(html[position:].lstrip())
            value, position = decoder.raw_decode(html, position)
            values.append(value)
            position = len(html) - len(html[position:].lstrip())
            if html[position : position + 1] not in (",", ")"):
                return None
            position += 1
    except json.JSONDecodeError:
        return None
    data, layout = values
    if not isinstance(data, list) or not isinstance(layout, dict):
        return None
    return {"data": data, "layout": layout}
