"""The Helm chart of deploy/helm rendered as Helm renders what it uses. No helm binary is packaged
in Debian; the chart keeps to this much of Helm's template language:

- `{{ .Values.x }}`, `{{ .Chart.Name }}` (Name, Version, AppVersion), `{{ .Release.Name }}` and
  `{{ .Release.Namespace }}` (rendered as a release "sloserve" in namespace "default");
- `{{- toYaml .Values.x | nindent N }}` and `{{- .Values.x | nindent N }}`;
- `{{- define "NAME" -}} ... {{- end }}` in `_*.tpl` files, and `{{- include "NAME" . | nindent N }}`;
- `{{/* comments */}}`.

    rendered, values, unrendered = render_helm(chart_dir, overrides={"workers": 3})

`rendered`: (template name, text) per manifest template (not `_*.tpl`, not NOTES.txt);
`unrendered`: (template name, why) for each template, NOTES.txt included, that uses syntax this
renderer does not know.
"""
import os
import re

import yaml

RELEASE = {"Name": "sloserve", "Namespace": "default"}


def render_helm(chart, overrides=None):
    """`overrides`: values set as `helm --set KEY=VALUE` would (top-level keys)."""
    values = yaml.safe_load(open(os.path.join(chart, "values.yaml")))
    values.update(overrides or {})
    meta = yaml.safe_load(open(os.path.join(chart, "Chart.yaml")))
    scope = {"Values": values, "Chart": {k[0].upper() + k[1:]: v for k, v in meta.items()}, "Release": RELEASE}

    def value(path):
        v = scope
        for part in path.split("."):
            v = v[part]
        return v

    def as_text(v, to_yaml):
        text = yaml.safe_dump(v, default_flow_style=False, sort_keys=True).rstrip("\n") if to_yaml else str(v)
        if text.endswith("\n..."):  # a scalar's document end marker
            text = text[:-4].rstrip("\n")
        return text

    def nindent(text, n):
        pad = " " * int(n)
        return "\n" + "\n".join(pad + line if line else line for line in text.split("\n"))

    templates = os.path.join(chart, "templates")
    defines = {}
    for name in sorted(os.listdir(templates)):
        if name.startswith("_"):
            text = re.sub(r"\{\{-? */\*.*?\*/ *-?\}\}\n?", "", open(os.path.join(templates, name)).read(), flags=re.S)
            for m in re.finditer(r'\{\{- *define "([^"]+)" *-\}\}\n?(.*?)\s*\{\{- *end *\}\}', text, re.S):
                defines[m.group(1)] = m.group(2)

    def render(text):
        text = re.sub(r"\{\{-? */\*.*?\*/ *-?\}\}\n?", "", text, flags=re.S)
        text = re.sub(r'[ \t]*\n?[ \t]*\{\{- *include "([^"]+)" \. *\| *nindent (\d+) *\}\}',
                      lambda m: nindent(render(defines[m.group(1)]), m.group(2)) if m.group(1) in defines else m.group(0),
                      text)
        text = re.sub(r"[ \t]*\n?[ \t]*\{\{(-)? *(toYaml +)?\.((?:Values|Chart|Release)\.[\w.]+) *\| *nindent (\d+) *\}\}",
                      lambda m: nindent(as_text(value(m.group(3)), m.group(2)), m.group(4)), text)
        return re.sub(r"\{\{-? *\.((?:Values|Chart|Release)\.[\w.]+) *\}\}", lambda m: str(value(m.group(1))), text)

    out, unrendered = [], []
    for name in sorted(os.listdir(templates)):
        if name.startswith("_"):
            continue
        text = render(open(os.path.join(templates, name)).read())
        if "{{" in text:
            unrendered.append((name, "uses template syntax this renderer does not know: " + text[text.index("{{"):][:60]))
        if name != "NOTES.txt":
            out.append((name, text))
    return out, values, unrendered
