"""Every FCL output readable in JupyterLab's light and dark themes, in headless Chromium.

A notebook of `%%opencl`, `%%costs`, `%%memory` and `%%expect` cells runs under each theme; in
the page, every visible text node of their outputs gets the WCAG contrast ratio between its text
colour and what is behind it (HTML: the element's and its ancestors' backgrounds, translucent
ones composited; SVG: the shapes drawn under the text, then the page behind the drawing), and
the ratio must reach 4.5 (WCAG AA for normal text). Same server and browser as test_e2e_lab.py.
"""
import json
import re
import time

import nbformat
import pytest

# `lab as lab` re-exports the fixture, which pytest finds by name in this module.
from browser import BROWSER_ARGS, browser_tools, kernel_dialog, lab as lab

AA = 4.5
TRANSPOSE = ("do<grid> {\n  xs <- forcePull<grid> (iota (64 * 64));\n"
             "  forcePull<grid> (transpose 64 64 xs)\n}")
REVERSE_IN_LOCAL = """\
-- each work-group reverses eight numbers through local memory
fun revLocal b =
  do<block> {
    chunk <- forcePull<block> (generate 8 (fn t => 8 * b + t));
    return<block> (push<block> (reverse chunk))
  }

forceM<grid> (generate 4 revLocal |> concat<block> 8)"""
CELLS = [
    "%%opencl\n" + REVERSE_IN_LOCAL,
    "%%costs\n" + TRANSPOSE,
    "%%memory --pitch 64\n" + TRANSPOSE,
    "%%memory\n" + REVERSE_IN_LOCAL,
    # ✓ for the value and the first budget, ✗ for the second and the verdict; the array result
    # has a header line in the theme's second text colour.
    "%%expect np.arange(4) * 2 --budget kernels<=1 kernels==0\n"
    "forcePull<grid> (generate 4 (fn i => 2 * i))",
]
# The kinds of FCL output (by a selector of their HTML): each must have text measured.
KINDS = {"codeview": ".fcl-codeview", "costs": ".fcl-costs", "sites": ".fcl-sites",
         "diagram": "svg.fcl-diagram", "checks": ".fcl-expect-check", "verdict": ".fcl-expect"}

# For each visible text node of the outputs: [text, contrast ratio, text colour, background, kind].
CONTRASTS = """(outputs, kinds) => {
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 1;
  const pen = canvas.getContext('2d', {willReadFrequently: true});
  // Any CSS colour as [r, g, b, a] in 0..255 and 0..1, as the browser itself parses it.
  const rgba = css => {
    pen.clearRect(0, 0, 1, 1);
    pen.fillStyle = '#000';
    pen.fillStyle = css;
    pen.fillRect(0, 0, 1, 1);
    const [r, g, b, a] = pen.getImageData(0, 0, 1, 1).data;
    return [r, g, b, a / 255];
  };
  const over = ([r, g, b, a], [R, G, B]) => [r * a + R * (1 - a), g * a + G * (1 - a),
                                              b * a + B * (1 - a), 1];
  const luminance = ([r, g, b]) => {
    const lin = c => (c /= 255) <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  };
  const ratio = (x, y) => {
    const [hi, lo] = [luminance(x), luminance(y)].sort((p, q) => q - p);
    return (hi + 0.05) / (lo + 0.05);
  };
  const solid = css => css && css !== 'none' && !css.startsWith('url');
  // The layers behind an element, topmost first: an SVG text's shapes drawn before it whose box
  // holds the text's centre, then the backgrounds of the element and its ancestors.
  const shapesOf = new Map();
  const layersBehind = (element, centre) => {
    const layers = [];
    const svg = element.closest('svg');
    if (svg) {
      if (!shapesOf.has(svg)) {
        shapesOf.set(svg, Array.from(svg.querySelectorAll('rect, circle, ellipse, polygon, path'))
          .filter(s => !s.closest('defs, pattern') && solid(getComputedStyle(s).fill))
          .map(s => [s, s.getBoundingClientRect()]));
      }
      for (const [shape, box] of shapesOf.get(svg).slice().reverse()) {
        if ((shape.compareDocumentPosition(element) & Node.DOCUMENT_POSITION_FOLLOWING)
            && box.left <= centre.x && centre.x <= box.right
            && box.top <= centre.y && centre.y <= box.bottom) {
          const style = getComputedStyle(shape);
          const [r, g, b, a] = rgba(style.fill);
          layers.push([r, g, b, a * parseFloat(style.fillOpacity)]);
        }
      }
      element = svg;
    }
    for (let e = element; e; e = e.parentElement) {
      layers.push(rgba(getComputedStyle(e).backgroundColor));
    }
    return layers;
  };
  const background = (element, centre) => {
    // Bottom up from the browser's white canvas, each layer over what is below it.
    let behind = [255, 255, 255, 1];
    for (const layer of layersBehind(element, centre).reverse()) behind = over(layer, behind);
    return behind;
  };
  const found = [];
  const hex = c => '#' + c.slice(0, 3).map(v => Math.round(v).toString(16).padStart(2, '0'))
    .join('');
  const measure = node => {
    const text = node.textContent.trim();
    const element = node.parentElement;
    if (!text || !element) return;
    const range = document.createRange();
    range.selectNodeContents(node);
    const box = range.getBoundingClientRect();
    if (box.width === 0 || box.height === 0
        || !element.checkVisibility({opacityProperty: true, visibilityProperty: true})) return;
    const centre = {x: box.left + box.width / 2, y: box.top + box.height / 2};
    const style = getComputedStyle(element);
    const back = background(element, centre);
    const fore = over(rgba(element instanceof SVGElement ? style.fill : style.color), back);
    const kind = Object.keys(kinds).find(k => element.closest(kinds[k])) || 'other';
    found.push([text.slice(0, 40), ratio(fore, back), hex(fore), hex(back), kind]);
  };
  for (const output of outputs) {
    const walker = document.createTreeWalker(output, NodeFilter.SHOW_TEXT);
    for (let node; (node = walker.nextNode());) measure(node);
  }
  // The colour bands pairing FCL lines with their OpenCL: each band's contrast with the page
  // behind it, as [text, ratio, band colour, background, 'band'].
  for (const output of outputs) {
    for (const band of output.querySelectorAll('.fcl-band')) {
      const box = band.getBoundingClientRect();
      const centre = {x: box.left + box.width / 2, y: box.top + box.height / 2};
      const back = background(band.parentElement, centre);
      const tinted = over(rgba(getComputedStyle(band).backgroundColor), back);
      found.push([band.textContent.trim().slice(0, 40), ratio(tinted, back), hex(tinted),
                  hex(back), 'band']);
    }
  }
  return found;
}"""


def run_all(page, notebook) -> None:
    """Run every cell once the FCL kernel is idle, and wait until they have all run."""
    kernel_status = page.locator(".jp-StatusBar-TextItem", has_text="FCL |")
    deadline = time.time() + 90
    while kernel_dialog(page) or "Idle" not in " ".join(kernel_status.all_text_contents()):
        assert time.time() < deadline, "the FCL kernel did not start"
        time.sleep(0.3)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    kernel_dialog(page)
    status = notebook.locator(".jp-Notebook-ExecutionIndicator")
    deadline = time.time() + 120
    while True:
        prompts = notebook.locator(".jp-CodeCell .jp-InputPrompt").all_text_contents()
        if (all(re.fullmatch(r"\s*\[\d+\]:\s*", t) for t in prompts)
                and status.get_attribute("data-status") == "idle"):
            return
        assert time.time() < deadline, f"the cells did not all run: {prompts}"
        time.sleep(0.5)


@pytest.mark.e2e
@pytest.mark.parametrize("theme, light", [("JupyterLab Light", "true"),
                                          ("JupyterLab Dark", "false")])
def test_every_output_is_readable_in_the_theme(lab, tmp_path, theme, light):
    chromium, expect, sync_playwright = browser_tools()
    base, token = lab
    # The server reads user settings on each request, so this applies from the first page load.
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    (settings / "themes.jupyterlab-settings").write_text(json.dumps({"theme": theme}))
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(cell) for cell in CELLS],
        metadata={"kernelspec": {"name": "fcl", "display_name": "FCL", "language": "fcl"}})
    nbformat.write(notebook, tmp_path / "notebooks" / "themes.ipynb")

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=BROWSER_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/lab/tree/themes.ipynb?token={token}")
            panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            expect(panel.locator(".jp-CodeCell").first).to_be_visible(timeout=90_000)
            expect(page.locator("body")).to_have_attribute("data-jp-theme-name", theme)
            expect(page.locator("body")).to_have_attribute("data-jp-theme-light", light)
            run_all(page, panel)
            errors = panel.locator(".jp-OutputArea-output[data-mime-type="
                                   "'application/vnd.jupyter.stderr']")
            assert errors.count() == 0, errors.all_text_contents()
            # Folded parts are outputs too: %%costs puts each access's table in a <details>.
            panel.locator(".jp-OutputArea details").evaluate_all(
                "ds => ds.forEach(d => { d.open = true; })")
            found = panel.locator(".jp-OutputArea-output").evaluate_all(CONTRASTS, KINDS)
            page.screenshot(path=str(tmp_path / "themes.png"), full_page=True)
        finally:
            browser.close()

    # The bands pairing FCL and OpenCL lines stand out from the page: in the dark theme as much
    # as the light theme's faintest (contrast 1.03: a light tint over white is easy to see, a
    # dark one over black is not, so the dark theme's tint is stronger and its bar must show).
    bands = [row for row in found if row[4] == "band"]
    found = [row for row in found if row[4] != "band"]
    assert bands, "no colour bands in the %%opencl view"
    least = 1.03 if light == "true" else 1.15
    faint = sorted({(round(ratio, 2), tint, back) for _, ratio, tint, back, _ in bands
                    if ratio < least})
    assert not faint, f"bands under {theme} with contrast below {least}: {faint}"
    # Everything was measured: each kind of output has text in the page.
    kinds = {kind for *_, kind in found}
    assert kinds >= set(KINDS), f"no text found in {set(KINDS) - kinds}"
    # One line per colour pair and output, worst first, with an example text and how many.
    unreadable: dict[tuple, list] = {}
    for text, ratio, fore, back, kind in sorted(row for row in found if row[1] < AA):
        unreadable.setdefault((ratio, fore, back, kind), []).append(text)
    assert not unreadable, (
        f"{sum(map(len, unreadable.values()))} of {len(found)} texts under {theme} are below "
        f"contrast {AA}; the worst (ratio, colour on background, output, texts):\n" + "\n".join(
            f"  {ratio:.2f} {fore} on {back} ({kind}): {len(texts)} like {texts[0]!r}"
            for (ratio, fore, back, kind), texts in sorted(unreadable.items())[:20]))
