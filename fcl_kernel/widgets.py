"""The kernel's ipywidgets: the settings panel, the memory explorer and the LMAD playground.

Each widget redraws by setting an HTML widget's value (an inline SVG), so nothing depends on
output capture, which a wrapper kernel does not have.
"""
from __future__ import annotations

import html

import ipywidgets as widgets

from fcl.analysis.access import WARP_SIZE
from fcl.analysis.gpu import gpu_names
from fcl.errors import FCLError
from fcl.lmad import LMAD, LMADError, render_svg
from fcl.lmad.report import describe
from fcl.memory.layouts import LAYOUTS
from fcl.runtime.device import BACKENDS
from fcl_kernel.expect import WRONG_COLOUR


def settings_panel(settings):
    """Widgets that change the workspace settings as they are moved."""
    backend = widgets.Dropdown(options=list(BACKENDS), value=settings.backend,
                               description="backend")
    block = widgets.BoundedIntText(value=settings.block_size, min=1, max=1024,
                                   description="block size")
    checks = widgets.Checkbox(value=settings.checks, description="run-time checks")
    gpu = widgets.Dropdown(options=gpu_names(), value=settings.gpu, description="GPU",
                           tooltip="the GPU whose occupancy and time %%costs predicts")
    layout = widgets.Dropdown(options=["auto", *LAYOUTS], value=settings.layout,
                              description="layout",
                              tooltip="how arrays of records lie in global memory")
    backend.observe(lambda change: setattr(settings, "backend", change["new"]), names="value")
    block.observe(lambda change: setattr(settings, "block_size", change["new"]), names="value")
    checks.observe(lambda change: setattr(settings, "checks", change["new"]), names="value")
    gpu.observe(lambda change: setattr(settings, "gpu", change["new"]), names="value")
    layout.observe(lambda change: setattr(settings, "layout", change["new"]), names="value")
    return widgets.HBox([backend, block, checks, gpu, layout])


def _problem(message: str) -> str:
    return f"<pre style='color:{WRONG_COLOUR}'>{html.escape(message)}</pre>"


def memory_explorer(explanation, array: str | None = None, pitch: int | None = None):
    """Pick the kernel, work-group, warp and row pitch of a memory diagram."""
    # The kernels that touch memory (`array`, if given); an error if none does.
    names = [name for name, _ in explanation.memory(None, array, pitch=pitch)]
    last = explanation.find_traced(names[-1])
    kernel = widgets.Dropdown(options=names, value=names[-1], description="kernel")
    group = widgets.BoundedIntText(value=0, min=0, max=max(0, last.groups - 1),
                                   description="work-group")
    warp = widgets.IntSlider(value=0, min=0, max=(last.block_size - 1) // WARP_SIZE,
                             description="warp")
    row = widgets.IntSlider(value=pitch or 0, min=0, max=128, description="pitch",
                            tooltip="elements per row; 0 chooses from the access pattern")

    def drawing() -> str:
        try:
            traced = explanation.find_traced(kernel.value, 0)
            group.max = max(0, traced.groups - 1)
            return explanation.memory(kernel.value, array, group.value, warp.value,
                                      row.value or None)[0][1].svg
        except FCLError as err:
            return _problem(err.message)

    # Drawn before the widget exists, so that its first state already holds the picture.
    picture = widgets.HTML(drawing())
    for control in (kernel, group, warp, row):
        control.observe(lambda _change: setattr(picture, "value", drawing()), names="value")
    return widgets.VBox([widgets.HBox([kernel, group]), widgets.HBox([warp, row]), picture])


def lmad_playground(offset: int = 2, dims=((3, 5), (4, 1)), pitch: int = 8):
    """An LMAD built with sliders: offset, up to three (size : stride) dimensions, the pitch."""
    slider = {"continuous_update": False, "style": {"description_width": "initial"}}
    start = widgets.IntSlider(value=offset, min=0, max=64, description="offset τ", **slider)
    rows = []
    controls = [start]
    padded = list(dims) + [(1, 1)] * (3 - len(dims))
    for k, (size, stride) in enumerate(padded[:3], start=1):
        sz = widgets.IntSlider(value=size, min=1, max=16, description=f"size σ{k}", **slider)
        st = widgets.IntSlider(value=stride, min=-16, max=32, description=f"stride δ{k}", **slider)
        rows.append(widgets.HBox([sz, st]))
        controls += [sz, st]
    width = widgets.IntSlider(value=pitch, min=1, max=32, description="pitch", **slider)
    controls.append(width)

    def drawings() -> tuple[str, str]:
        values = [c.value for c in controls]
        tau, pairs = values[0], values[1:-1]
        dimensions = tuple((pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2)
                           if pairs[i] > 1)
        try:
            lmad = LMAD(tau, dimensions)
            return (f"<pre>{html.escape(chr(10).join(describe(lmad, True)))}</pre>",
                    render_svg(lmad, width.value))
        except LMADError as err:
            return _problem(str(err)), ""

    facts, picture = (widgets.HTML(value) for value in drawings())

    def redraw(_change) -> None:
        facts.value, picture.value = drawings()

    for control in controls:
        control.observe(redraw, names="value")
    return widgets.VBox([start, *rows, width, facts, picture])
