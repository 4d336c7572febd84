"""The Helm chart of deploy/helm rendered as Helm renders what it uses: `{{ .Values.x }}` and
`{{- .Values.x | nindent N }}` (also with `toYaml`). No helm binary is packaged in Debian.

    rendered, values, unrendered = render_helm(chart_dir)

`rendered`: (template name, text) per template; `unrendered`: (template name, why) for each
template that uses syntax this renderer does not know.
"""
import os
import re

import yaml


def render_helm(chart):
    values = yaml.safe_load(open(os.path.join(chart, "values.yaml")))

    def value(path):
        v = values
        for part in path.split("."):
            v = v[part]
        return v

    def sub(m):
        v = value(m.group(3))
        text = yaml.safe_dump(v, default_flow_style=False).rstrip("\n") if m.group(2) else str(v)
        if text.endswith("\n..."):  # a scalar's document end marker
            text = text[:-4].rstrip("\n")
        if m.group(4):  # nindent N
            pad = " " * int(m.group(4))
            return "\n" + "\n".join(pad + line if line else line for line in text.split("\n"))
        return text

    out, unrendered = [], []
    for name in sorted(os.listdir(os.path.join(chart, "templates"))):
        text = open(os.path.join(chart, "templates", name)).read()
        text = re.sub(r"[ \t]*\n?[ \t]*\{\{(-)? *(toYaml +)?\.Values\.([\w.]+) *\| *nindent (\d+) *\}\}", sub, text)
        text = re.sub(r"\{\{(-)? *\.Values\.([\w.]+)()() *\}\}", lambda m: str(value(m.group(2))), text)
        if "{{" in text:
            unrendered.append((name, "uses template syntax this renderer does not know: " + text[text.index("{{"):][:60]))
        out.append((name, text))
    return out, values, unrendered
