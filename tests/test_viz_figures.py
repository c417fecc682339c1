"""workbench.viz.figures: saving into <output_dir>/figures and the headless renderer."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from workbench.viz import figures


@pytest.fixture(autouse=True)
def _reset_output_dir():
    yield
    figures.set_output_dir(None)


def test_save_writes_standalone_html_json_and_one_plotly_js(tmp_path):
    figures.set_output_dir(tmp_path, renderer=None)
    figures_dir = tmp_path / "figures"
    fig = go.Figure(go.Bar(x=["a", "b"], y=[1, 3]))
    html_path, json_path = figures.save(fig, "bars")
    figures.save(fig, "bars_again")
    assert json.loads(json_path.read_text())["data"][0]["y"] == [1, 3]
    assert 'src="plotly.min.js"' in html_path.read_text()
    assert sorted(p.name for p in figures_dir.iterdir()) == [
        "bars.html",
        "bars.json",
        "bars_again.html",
        "bars_again.json",
        "plotly.min.js",
    ]


def test_show_saves_only_when_an_output_dir_is_set(tmp_path):
    fig = go.Figure(go.Scatter(x=[0, 1], y=[1, 0]))
    assert figures.show(fig, "line") is None
    assert not (tmp_path / "figures").exists()
    figures.set_output_dir(tmp_path, renderer=None)
    assert figures.show(fig, "line") is None
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["line.html", "line.json", "plotly.min.js"]


def test_set_output_dir_sets_the_headless_renderer(tmp_path, monkeypatch):
    monkeypatch.setattr(pio.renderers, "_default_name", "json")
    monkeypatch.setattr(pio.renderers, "_default_renderers", [])
    figures.set_output_dir(tmp_path, renderer="png")  # a renderer without notebook activation
    assert pio.renderers.default == "png"
    figures.set_output_dir(None)
    assert pio.renderers.default == "png"  # turning saving off leaves the renderer alone


@pytest.mark.parametrize("name", ["", "../up", "a b", "/abs"])
def test_bad_names_rejected(tmp_path, name):
    figures.set_output_dir(tmp_path, renderer=None)
    with pytest.raises(ValueError, match=r"^name:"):
        figures.show(go.Figure(), name)


def test_save_needs_a_folder_and_a_figure(tmp_path):
    with pytest.raises(ValueError, match=r"^directory:"):
        figures.save(go.Figure(), "x")
    with pytest.raises(ValueError, match=r"^fig:"):
        figures.save({"data": []}, "x", directory=tmp_path)


def test_headless_renderer_outputs_carry_no_plotly_js_and_no_cdn_script():
    assert figures.HEADLESS_RENDERER.split("+") == ["plotly_mimetype", "workbench_html"]
    fig = go.Figure(go.Scatter(x=[0, 1], y=[1, 0]))
    bundle = pio.renderers["workbench_html"].to_mimebundle(fig.to_dict())
    html = bundle["text/html"]
    assert list(bundle) == ["text/html"] and "Plotly.newPlot" in html
    assert "<script src" not in html and "http" not in html  # the page loads plotly.js; no CDN MathJax
    assert len(html) < 20_000  # the notebook renderer put 4.7 MB of plotly.js into each notebook
    assert "application/vnd.plotly.v1+json" in pio.renderers["plotly_mimetype"].to_mimebundle(fig.to_dict())


def test_reliability_diagram_draws_the_filled_bins_of_each_loss_and_the_diagonal():
    from workbench.metrics import reliability_bins
    from workbench.viz import reliability_diagram

    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.25, 0.75]])
    bins = {
        name: {key: value.tolist() for key, value in reliability_bins(probs, np.array(labels), 10).items()}
        for name, labels in (("CE", [0, 1, 1]), ("DSC", [0, 0, 0]))
    }
    figure = reliability_diagram(bins, {"CE": 0.3167})
    names = [trace.name for trace in figure.data]
    assert names == ["perfect calibration", "CE (ECE 31.67%)", "DSC"]  # 0.3167 as a percentage, marked as one
    assert list(figure.data[1].x) == pytest.approx([0.6, 0.75, 0.9])  # three filled bins, by confidence
    assert list(figure.data[2].y) == [1.0, 0.0, 1.0]  # gold 0 everywhere: the argmax is right at 0.6 and 0.9
    with pytest.raises(ValueError, match="^bins"):
        reliability_diagram({})


def test_show_saves_the_caption_the_notebook_gives(tmp_path):
    figures.set_output_dir(tmp_path, renderer=None)
    figures.show(go.Figure(), "counts", caption="  How many examples each class has, per split. ")
    assert (tmp_path / "figures" / "counts.caption.txt").read_text() == "How many examples each class has, per split.\n"
    figures.show(go.Figure(), "plain")
    assert not (tmp_path / "figures" / "plain.caption.txt").exists()
    for caption in ("", "  ", 3):
        with pytest.raises(ValueError, match=r"^caption:"):
            figures.show(go.Figure(), "bad", caption=caption)
    assert not (tmp_path / "figures" / "bad.json").exists()
