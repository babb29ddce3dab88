/* tally flame graphs: zoom on click, search with highlight, hover details,
 * frames under a pixel hidden (with a button to show them), and views of a
 * selected function: its sandwich (callers above it, callees below it,
 * merged over every place it appears), focus (only the stacks through it,
 * rescaled) and ignore (without the stacks through it); Reset view undoes
 * all. Runs in a standalone SVG document and in the HTML report; works on
 * every <svg class="tally-flame"> of the document, each drawn by
 * lib/export/flame.c with its frames (root at the top) as
 * <g class="f" data-x data-c data-d> (left edge and width in samples, depth),
 * <title> name, "in IMAGE", figures. */
(function () {
	"use strict";
	var NS = "http://www.w3.org/2000/svg";
	function num(el, a) { return Number(el.getAttribute(a)); }
	function pct(n, d) { return d ? (100 * n / d).toFixed(2) + "%" : "0.00%"; }
	function plural(n, w) { return n + " " + w + (n === 1 ? "" : "s"); }

	/* ---- the model: trees of functions, merged by name and image ---- */

	/* A node: { key, name, image, fill, c (samples, inclusive), kids [] }. */
	function node(src, c) {
		return { key: src.key, name: src.name, image: src.image, fill: src.fill, c: c || 0, kids: [], idx: null };
	}
	function kid(n, src) {
		if (!n.idx) {
			n.idx = {};
			for (var i = 0; i < n.kids.length; i++) n.idx[n.kids[i].key] = n.kids[i];
		}
		var k = n.idx[src.key];
		if (!k) {
			k = node(src, 0);
			n.kids.push(k);
			n.idx[src.key] = k;
		}
		return k;
	}
	/* adds the tree under src into dst (counts summed, kids merged by key) */
	function addTree(dst, src) {
		for (var i = 0; i < src.kids.length; i++) {
			var s = src.kids[i], d = kid(dst, s);
			d.c += s.c;
			addTree(d, s);
		}
	}
	function sortKids(n) {
		n.kids.sort(function (a, b) { return a.name < b.name ? -1 : a.name > b.name ? 1 : (a.image < b.image ? -1 : a.image > b.image ? 1 : 0); });
		for (var i = 0; i < n.kids.length; i++) sortKids(n.kids[i]);
	}
	/* the outermost nodes of function key (a recursion counts once), each
	 * with the path of nodes from the root down to it */
	function places(root, key) {
		var out = [], path = [];
		(function walk(n) {
			if (n.key === key) { out.push({ n: n, path: path.slice() }); return; }
			path.push(n);
			for (var i = 0; i < n.kids.length; i++) walk(n.kids[i]);
			path.pop();
		})(root);
		return out;
	}
	/* only the stacks through key, rescaled to their total */
	function focusTree(root, key) {
		var r = node(root, 0), ps = places(root, key);
		for (var i = 0; i < ps.length; i++) {
			var p = ps[i], at = r, c = p.n.c;
			r.c += c;
			for (var k = 1; k < p.path.length; k++) { at = kid(at, p.path[k]); at.c += c; }
			at = kid(at, p.n);
			at.c += c;
			addTree(at, p.n);
		}
		sortKids(r);
		return r;
	}
	/* without the stacks through key */
	function ignoreTree(root, key) {
		function copy(n) {
			var m = node(n, 0), kept = 0, kc = 0;
			for (var i = 0; i < n.kids.length; i++) {
				kc += n.kids[i].c;
				if (n.kids[i].key === key) continue;
				var k = copy(n.kids[i]);
				if (k.c > 0) { m.kids.push(k); kept += k.c; }
			}
			m.c = n.c - kc + kept; /* its self samples and what stays above */
			return m;
		}
		return copy(root);
	}
	/* the sandwich of key: the callees merged over all its places, and its
	 * callers (the paths down to it, nearest caller first) merged */
	function sandwichTrees(root, key, inverted) {
		var ps = places(root, key), up = null, down = null;
		for (var i = 0; i < ps.length; i++) {
			var p = ps[i];
			if (!up) { up = node(p.n, 0); down = node(p.n, 0); }
			up.c += p.n.c;
			down.c += p.n.c;
			addTree(down, p.n);
			var at = up;
			for (var k = p.path.length - 1; k >= 1; k--) { at = kid(at, p.path[k]); at.c += p.n.c; }
		}
		if (!up) return null;
		sortKids(up);
		sortKids(down);
		/* in the inverted graph a function's kids are its callers */
		return inverted ? { callers: down, callees: up } : { callers: up, callees: down };
	}
	/* preorder frames of a tree: { n, x, c, d } (x and c in samples) */
	function flatten(root, dir, out) {
		(function walk(n, x, d) {
			out.push({ n: n, x: x, c: n.c, d: d, dir: dir });
			for (var i = 0; i < n.kids.length; i++) { walk(n.kids[i], x, d + 1); x += n.kids[i].c; }
		})(root, 0, 0);
		return out;
	}

	function init(svg) {
		if (svg.tallyFlame) return svg.tallyFlame;
		var W = num(svg, "data-width"), pad = num(svg, "data-pad"), cw = num(svg, "data-char");
		var FH = num(svg, "data-fh") || 16, TOP = num(svg, "data-top") || 96, BOTTOM = num(svg, "data-bottom") || 30;
		var unit = svg.getAttribute("data-unit") || "samples";
		/* a value as the frames' titles show it: msec from ns, events, samples */
		function val(n) {
			if (unit === "msec") return (n / 1e6).toFixed(1) + " msec";
			return plural(n, unit === "events" ? "event" : "sample");
		}
		var total = num(svg, "data-total"), span = W - 2 * pad, inverted = svg.getAttribute("data-inverted") === "1";
		function q(sel) { return svg.querySelector(sel); }
		var group = q("g.frames"), bg = q("rect.bg"), legend = q("text.legend");
		var details = q("text.details"), matched = q("text.matched"), state = q("text.state");
		var resetBtn = q(".reset"), searchBtn = q(".search"), clearBtn = q(".clear"), tinyBtn = q(".tinies");
		var selbar = q(".selbar"), selname = q(".selbar .name");

		/* the frames drawn by flame.c, and the tree they form */
		var frames = [], stack = [];
		var els = svg.querySelectorAll("g.frames g.f");
		for (var i = 0; i < els.length; i++) {
			var g = els[i], title = g.querySelector("title").textContent.split("\n");
			var image = title.length > 1 && title[1].indexOf("in ") === 0 ? title[1].substring(3).replace(/ \(inlined\)$/, "") : "";
			var rect = g.querySelector("rect");
			var f = { g: g, rect: rect, text: g.querySelector("text"),
				x: num(g, "data-x"), c: num(g, "data-c"), d: num(g, "data-d"),
				name: title[0], image: image, key: title[0] + "\n" + image, fill: rect.getAttribute("fill"),
				info: title.slice(1).join(", "), i: i };
			f.n = { key: f.key, name: f.name, image: image, fill: f.fill, c: f.c, kids: [], idx: null };
			stack.length = f.d;
			if (f.d > 0 && stack[f.d - 1]) stack[f.d - 1].kids.push(f.n);
			stack[f.d] = f.n;
			frames.push(f);
			g.setAttribute("data-i", String(i));
		}
		var baseRoot = frames.length ? frames[0].n : null;

		/* the view: what is drawn (base frames or a derived list), and how */
		var cur = frames, curTotal = total, derived = null, viewTotal = total;
		var zoomed = null, term = null, matchedPct = 0, showTiny = false, selected = null;
		var filters = [], sandwichKey = null;

		function label(f, w) {
			var fit = Math.floor((w - 6) / cw);
			if (fit < 3) return "";
			if (f.name.length <= fit) return f.name;
			return f.name.substring(0, fit - 2) + "..";
		}
		function place(f, x, w) {
			f.rect.setAttribute("x", x.toFixed(1));
			f.rect.setAttribute("width", w.toFixed(1));
			f.text.setAttribute("x", (x + 3).toFixed(1));
			f.text.textContent = label(f, w);
			f.w = w;
		}
		function setHeight(h) {
			svg.setAttribute("height", String(h));
			svg.setAttribute("viewBox", "0 0 " + W + " " + h);
			bg.setAttribute("height", String(h));
			if (legend) legend.setAttribute("y", String(h - 10));
		}
		function layout() {
			var t = zoomed, tiny = 0, lo = 0, hi = 0;
			for (var i = 0; i < cur.length; i++) {
				var f = cur[i], cls = "f", w;
				if (!t) {
					place(f, pad + f.x / f.total * span, w = f.c / f.total * span);
				} else if (f.d <= t.d && f.x <= t.x && f.x + f.c >= t.x + t.c) {
					/* the frame clicked and what is under it: full width */
					place(f, pad, w = span);
					if (f.d < t.d) cls += " dim";
				} else if (f.d > t.d && f.x >= t.x && f.x + f.c <= t.x + t.c) {
					place(f, pad + (f.x - t.x) / t.c * span, w = f.c / t.c * span);
				} else {
					cls += " hide";
					w = -1;
				}
				if (w >= 0 && w < 1 && f.d > 0) {
					tiny++;
					if (!showTiny) { cls += " hide tiny"; w = -1; }
				}
				if (w >= 0) {
					var y = f.dir * f.d;
					if (y < lo) lo = y;
					if (y > hi) hi = y;
				}
				if (f.match) cls += " match";
				f.g.setAttribute("class", cls);
			}
			/* rows from lo to hi (the sandwich's callers stand above its middle row) */
			for (var k = 0; k < cur.length; k++) {
				var fk = cur[k], y0 = TOP + (fk.dir * fk.d - lo) * FH;
				fk.rect.setAttribute("y", String(y0));
				fk.text.setAttribute("y", String(y0 + FH - 4));
			}
			setHeight(TOP + (hi - lo + 1) * FH + BOTTOM);
			tinyBtn.textContent = showTiny ? "Hide the frames under a pixel" : "Show " + plural(tiny, "frame") + " under a pixel";
			tinyBtn.setAttribute("class", "btn tinies" + (tiny || showTiny ? "" : " hide"));
			var changed = t || filters.length || sandwichKey;
			resetBtn.setAttribute("class", "btn reset" + (changed ? "" : " hide"));
			var st = [];
			if (sandwichKey) st.push("sandwich of " + sandwichKey.split("\n")[0] + " (callers above, callees below)");
			for (var j = 0; j < filters.length; j++)
				st.push((filters[j].op === "focus" ? "focus on " : "ignoring ") + filters[j].name);
			if (filters.length) st.push(val(viewTotal) + ", " + pct(viewTotal, total) + " of all");
			state.textContent = st.length ? st.join("; ") : " ";
			if (selected) {
				selname.textContent = selected.split("\n")[0] + ":";
				selbar.setAttribute("class", "selbar");
			} else {
				selbar.setAttribute("class", "selbar hide");
			}
		}
		for (var fi = 0; fi < frames.length; fi++) { frames[fi].total = total; frames[fi].dir = 1; }

		/* draws a derived list of frames into its own group */
		function draw(list) {
			if (derived) derived.parentNode.removeChild(derived);
			derived = document.createElementNS(NS, "g");
			derived.setAttribute("class", "frames view");
			for (var i = 0; i < list.length; i++) {
				var f = list[i], g = document.createElementNS(NS, "g");
				var t = document.createElementNS(NS, "title"), r = document.createElementNS(NS, "rect");
				var tx = document.createElementNS(NS, "text");
				f.name = f.n.name;
				f.image = f.n.image;
				f.key = f.n.key;
				f.info = (f.image ? "in " + f.image + ", " : "") + val(f.c) + ", " + pct(f.c, f.total) +
					(f.total !== total ? " of this view, " + pct(f.c, total) + " of all" : "");
				t.textContent = f.name + "\n" + f.info.replace(/, /, "\n");
				r.setAttribute("height", String(FH - 1));
				r.setAttribute("rx", "2");
				r.setAttribute("fill", f.n.fill);
				g.appendChild(t);
				g.appendChild(r);
				g.appendChild(tx);
				g.setAttribute("data-i", String(i));
				f.g = g;
				f.rect = r;
				f.text = tx;
				f.i = i;
				derived.appendChild(g);
			}
			group.parentNode.insertBefore(derived, group.nextSibling);
			group.setAttribute("class", "frames hide");
			return list;
		}
		/* builds the view from the filters and the sandwich */
		function rebuild() {
			zoomed = null;
			if (derived) { derived.parentNode.removeChild(derived); derived = null; }
			group.setAttribute("class", "frames");
			if (!filters.length && !sandwichKey) {
				cur = frames;
				viewTotal = total;
			} else {
				var root = baseRoot;
				for (var i = 0; i < filters.length; i++)
					root = filters[i].op === "focus" ? focusTree(root, filters[i].key) : ignoreTree(root, filters[i].key);
				viewTotal = root.c;
				var list = [];
				var sw = sandwichKey ? sandwichTrees(root, sandwichKey, inverted) : null;
				if (sw) {
					/* one middle row: the function; its callers up, its callees down */
					flatten(sw.callers, -1, list);
					list.shift();
					flatten(sw.callees, 1, list);
					for (var k = 0; k < list.length; k++) list[k].total = sw.callees.c;
				} else {
					if (sandwichKey) sandwichKey = null; /* not in this view */
					flatten(root, 1, list);
					for (var j = 0; j < list.length; j++) list[j].total = root.c;
				}
				cur = draw(list);
			}
			if (term) search(term);
			else layout();
		}

		function zoom(f) {
			if (typeof f === "number") f = cur[f];
			/* the sandwich draws two trees: no zoom there */
			zoomed = f && f.d > 0 && !sandwichKey ? f : null;
			layout();
		}
		function search(s) {
			term = s || null;
			var re = null;
			if (term) {
				try { re = new RegExp(term); } catch (e) {
					re = new RegExp(term.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
				}
			}
			var spans = [];
			for (var i = 0; i < cur.length; i++) {
				var f = cur[i];
				f.match = !!(re && (f.d > 0 || sandwichKey) && re.test(f.name));
				if (f.match && f.dir > 0) spans.push([f.x, f.x + f.c]);
			}
			/* a frame and a matching frame under it count once */
			spans.sort(function (a, b) { return a[0] - b[0]; });
			var sum = 0, end = -1;
			for (var k = 0; k < spans.length; k++) {
				var a = Math.max(spans[k][0], end);
				if (spans[k][1] > a) sum += spans[k][1] - a;
				end = Math.max(end, spans[k][1]);
			}
			var of = cur.length ? cur[0].total : total;
			matchedPct = of ? 100 * sum / of : 0;
			matched.textContent = term ? "Matched: " + matchedPct.toFixed(2) + "% (" + val(sum) + ")" : " ";
			clearBtn.setAttribute("class", "btn clear" + (term ? "" : " hide"));
			layout();
			return matchedPct;
		}
		function keyOf(a, image) {
			if (image === undefined) {
				if (a && a.key) return a.key;
				if (typeof a === "string" && a.indexOf("\n") >= 0) return a;
				/* a name alone: the widest function of that name */
				var best = null;
				for (var i = 0; i < frames.length; i++)
					if (frames[i].name === a && (!best || frames[i].c > best.c)) best = frames[i];
				return best ? best.key : null;
			}
			if (a === "[unknown]") a = "[" + image + "]";
			return a + "\n" + image;
		}
		function has(key) {
			for (var i = 0; i < frames.length; i++) if (frames[i].key === key && frames[i].d > 0) return true;
			return false;
		}
		function select(k) {
			k = keyOf(k);
			selected = k && has(k) ? k : null;
			layout();
			return selected;
		}
		function sandwich(k) {
			k = keyOf(k);
			if (!k || !has(k)) return false;
			selected = k;
			sandwichKey = k;
			rebuild();
			return !!sandwichKey;
		}
		function filter(op, k) {
			k = keyOf(k);
			if (!k || !has(k)) return false;
			filters.push({ op: op, key: k, name: k.split("\n")[0] });
			sandwichKey = null;
			rebuild();
			return true;
		}
		function reset() {
			filters = [];
			sandwichKey = null;
			rebuild();
		}
		function tinies(on) {
			showTiny = on === undefined ? !showTiny : !!on;
			layout();
			return showTiny;
		}

		function frameOf(ev) {
			var n = ev.target;
			while (n && n !== svg && !(n.getAttribute && n.getAttribute("data-i") !== null)) n = n.parentNode;
			return n && n !== svg ? cur[Number(n.getAttribute("data-i"))] : null;
		}
		svg.addEventListener("click", function (ev) {
			var f = frameOf(ev);
			if (!f) return;
			if (f.d > 0 && f.name !== "other" && f.name.indexOf("[deeper") !== 0) selected = f.key;
			/* in a sandwich a click moves it to the function clicked */
			if (sandwichKey && f.key !== sandwichKey && selected === f.key) sandwich(f.key);
			else zoom(f);
		});
		svg.addEventListener("mouseover", function (ev) {
			var f = frameOf(ev);
			details.textContent = f ? f.name + " \u2014 " + f.info : " ";
		});
		svg.addEventListener("mouseout", function () { details.textContent = " "; });
		function button(el, fn) {
			el.addEventListener("click", function (ev) { ev.stopPropagation(); fn(); });
		}
		button(resetBtn, function () { reset(); });
		button(clearBtn, function () { search(null); });
		button(tinyBtn, function () { tinies(); });
		button(q(".selbar .sandwich"), function () { sandwich(selected); });
		button(q(".selbar .focus"), function () { filter("focus", selected); });
		button(q(".selbar .ignore"), function () { filter("ignore", selected); });
		function ask() {
			var s = window.prompt("Search for functions (a regular expression)", term || "");
			if (s !== null) search(s);
		}
		button(searchBtn, ask);
		if (document.documentElement === svg) {
			/* the SVG alone in a browser: Ctrl-F searches, Escape resets */
			window.addEventListener("keydown", function (ev) {
				if ((ev.ctrlKey || ev.metaKey) && ev.key === "f") { ev.preventDefault(); ask(); }
				else if (ev.key === "Escape") reset();
			});
		}
		layout();
		svg.tallyFlame = {
			frames: frames, zoom: zoom, search: search, reset: reset,
			view: function () { return cur; },
			zoomed: function () { return zoomed; },
			matched: function () { return matchedPct; },
			keyOf: keyOf, select: select, sandwich: sandwich,
			focus: function (k) { return filter("focus", k); },
			ignore: function (k) { return filter("ignore", k); },
			tinies: tinies,
			state: function () { return { filters: filters.slice(), sandwich: sandwichKey, selected: selected, total: viewTotal }; }
		};
		return svg.tallyFlame;
	}

	function all() {
		var s = document.querySelectorAll("svg.tally-flame");
		for (var i = 0; i < s.length; i++) init(s[i]);
	}
	window.tallyFlameInit = init;
	if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", all);
	else all();
})();
