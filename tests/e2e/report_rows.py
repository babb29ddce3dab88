"""The rows of a report, read back from each of its renderings: the text of
`tally report` (docs/cli.md), its JSON (docs/report-json.md) and the HTML
page's tables (docs/html.md; their numbers are in the cells' data-v
attributes, read here with the standard library's HTML parser, no browser).
Every reader returns, per event, a list of dicts with the same keys, so that
a test can check that the three list the same rows with the same counts.

    images:    name, pid (None without --per-pid), samples
    functions: image (name), name, addr ("0x..." or None), samples
    lines:     image, file (base name, or None), line, function, samples
    children:  image, name, self, incl        (self: samples; text gives a
               percentage, which text_children turns back into samples)
"""
import html.parser
import json
import os
import re


def _events_text(path):
    """Text report -> [(event, [lines])] (the lost line left out)."""
    out, cur = [], None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        m = re.match(r"^# event: ([^,]+),", line)
        if m:
            cur = (m.group(1), [])
            out.append(cur)
        elif cur is not None and not line.startswith("lost: ") and not line.startswith("# "):
            cur[1].append(line)
    return out


def text_images(path):
    ev = {}
    for name, lines in _events_text(path):
        rows = []
        for l in lines:
            m = re.match(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%  (.*)$", l)
            if not m:
                continue
            label = m.group(2)
            p = re.match(r"^(.*) \[(\d+)\]$", label)
            rows.append(dict(name=p.group(1) if p else label, pid=int(p.group(2)) if p else None,
                             samples=int(m.group(1))))
        ev[name] = rows
    return ev


def _sections(path, json_images, row_re, make):
    """The image sections of --symbols or --lines: the sections of one event
    are the image rows in order; the JSON's image rows (same order) name them
    (a title is the image's path, or its name when it has none)."""
    ev = {}
    for name, lines in _events_text(path):
        sections, cur = [], None
        for l in lines:
            m = re.match(r"^(.+) \((\d+) samples?, [\d.]+% of total\)$", l)
            if m:
                cur = dict(title=m.group(1), samples=int(m.group(2)), rows=[])
                sections.append(cur)
                continue
            m = re.match(row_re, l)
            if m and cur is not None:
                cur["rows"].append(m)
        imgs = json_images[name]
        if len(imgs) != len(sections):
            raise ValueError("event %s: %d image sections in the text, %d images in the JSON" %
                             (name, len(sections), len(imgs)))
        rows = []
        for s, im in zip(sections, imgs):
            if s["title"] not in (im["path"], im["name"]) or s["samples"] != im["samples"]:
                raise ValueError("event %s: text section %r (%d samples) is not JSON image %r (%d)" %
                                 (name, s["title"], s["samples"], im["name"], im["samples"]))
            rows += [make(im, m) for m in s["rows"]]
        ev[name] = rows
    return ev


def text_lines(path, json_images):
    """--lines: `samples % cum% file:line function`, "-" without a line."""
    def make(im, m):
        loc = m.group(2)
        f, _, ln = loc.rpartition(":") if loc != "-" else (None, None, None)
        return dict(image=im["name"], file=f, line=int(ln) if ln else None, function=m.group(3),
                    samples=int(m.group(1)))
    return _sections(path, json_images, r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%  (\S+)\s+(\S.*?)( \(inlined\))?$", make)


def text_functions(path, json_images):
    """--symbols: `samples % cum% addr function`, "-" without an address."""
    def make(im, m):
        addr = None if m.group(2) == "-" else "0x%x" % int(m.group(2), 16)
        return dict(image=im["name"], pid=im["pid"], name=m.group(3), addr=addr, samples=int(m.group(1)))
    return _sections(path, json_images, r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(0x[0-9a-f]+|-)  (.*?)( \(inlined\))?$", make)


def text_children(path):
    """--children: the self column is a percentage of the event's samples,
    turned back into samples with the event's total (the unwind line's)."""
    ev = {}
    for name, lines in _events_text(path):
        total = None
        for l in lines:
            m = re.match(r"^unwind: [\d.]+% of (\d+) samples", l)
            if m:
                total = int(m.group(1))
        rows = []
        for l in lines:
            m = re.match(r"^\s*([\d.]+)%\s+([\d.]+)%\s+(\d+)  (.*?)( \(inlined\))?  \[(.*)\]$", l)
            if m:
                rows.append(dict(image=m.group(6), name=m.group(4), incl=int(m.group(3)),
                                 self_pct=m.group(2), total=total))
        ev[name] = rows
    return ev


def json_report(path):
    return json.load(open(path, encoding="utf-8"))


def json_images(doc):
    return {e["name"]: [dict(name=i["name"], path=i["path"], pid=i["pid"], samples=i["samples"]) for i in e["images"]]
            for e in doc["events"]}


def json_functions(doc):
    return {e["name"]: [dict(image=i["name"], pid=i["pid"], name=f["name"], addr=f["addr"], samples=f["samples"])
                        for i in e["images"] for f in i["functions"]]
            for e in doc["events"]}


def json_lines(doc):
    return {e["name"]: [dict(image=i["name"], file=os.path.basename(l["file"]) if l["file"] else None, line=l["line"],
                             function=l["function"], samples=l["samples"])
                        for i in e["images"] for l in i["lines"]]
            for e in doc["events"]}


def json_children(doc):
    return {e["name"]: [dict(image=f["image"], name=f["name"], self=f["self"], incl=f["inclusive"])
                        for f in e["functions"]]
            for e in doc["events"]}


class _Tables(html.parser.HTMLParser):
    """Rows of the images and functions tables of each event section: one
    dict per row, a cell by its class (without "n"): its data-v as a number
    when it has one, else its text; "fn" cells also give their title."""

    def __init__(self):
        super().__init__()
        self.events, self.cur, self.table, self.row, self.cell = {}, None, None, None, None
        self.in_h2 = False
        self.notes = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "section" and "event" in cls:
            self.cur = {"images": [], "functions": [], "name": None}
            self.events[a["id"]] = self.cur
        elif tag == "h2" and self.cur is not None and self.cur["name"] is None:
            self.in_h2 = True
            self.h2 = ""
        elif tag == "table" and self.cur is not None:
            if "images" in cls:
                self.table = "images"
            elif "functions" in cls:
                self.table = "functions"
        elif tag == "tr" and self.table:
            self.row = {}
        elif tag == "td" and self.row is not None:
            k = [c for c in cls if c != "n"]
            self.cell = dict(key=k[0] if k else "", v=a.get("data-v"), title=a.get("title"), text="")
        elif tag == "p" and self.cur is not None and "note" in cls:
            self.note = ""

    def handle_endtag(self, tag):
        if tag == "h2" and self.in_h2:
            self.in_h2 = False
            self.cur["name"] = self.h2[len("Event "):] if self.h2.startswith("Event ") else self.h2
        elif tag == "td" and self.cell is not None:
            c = self.cell
            self.row[c["key"]] = float(c["v"]) if c["v"] is not None else c["text"]
            if c["key"] == "fn":
                self.row["title"] = c["title"]
            self.cell = None
        elif tag == "tr" and self.row is not None:
            if self.row:
                self.cur[self.table].append(self.row)
            self.row = None
        elif tag == "table":
            self.table = None
        elif tag == "section":
            self.cur = None

    def handle_data(self, data):
        if self.in_h2:
            self.h2 += data
        if self.cell is not None:
            self.cell["text"] += data


def html_tables(path):
    """{event: {"images": [...], "functions": [...]}} in the dicts' shapes above."""
    p = _Tables()
    p.feed(open(path, encoding="utf-8").read())
    out = {}
    for sec in p.events.values():
        imgs = [dict(name=r["img"], pid=int(r["pid"]) if "pid" in r else None, samples=int(r["samples"]))
                for r in sec["images"]]
        fns = []
        for r in sec["functions"]:
            d = dict(image=r["img"], name=r["fn"], addr=r.get("title"), samples=int(r["self"]))
            if "incl" in r:
                d["self"], d["incl"] = int(r["self"]), int(r["incl"])
            fns.append(d)
        out[sec["name"]] = dict(images=imgs, functions=fns)
    return out
