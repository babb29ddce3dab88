/* tally flame graphs: zoom on click, reset, search with highlight, hover
 * details. Runs in a standalone SVG document and in the HTML report; works
 * on every <svg class="tally-flame"> of the document, each drawn by
 * lib/export/flame.c with its frames as <g class="f" data-x data-c data-d>
 * (left edge and width in samples, depth), <title> name, image, figures. */
(function () {
	"use strict";
	function num(el, a) { return Number(el.getAttribute(a)); }
	function pct(n, d) { return d ? (100 * n / d).toFixed(2) + "%" : "0.00%"; }

	function init(svg) {
		if (svg.tallyFlame) return svg.tallyFlame;
		var W = num(svg, "data-width"), pad = num(svg, "data-pad"), cw = num(svg, "data-char");
		var total = num(svg, "data-total"), span = W - 2 * pad;
		var frames = [];
		var els = svg.querySelectorAll("g.f");
		for (var i = 0; i < els.length; i++) {
			var g = els[i], title = g.querySelector("title").textContent.split("\n");
			frames.push({ g: g, rect: g.querySelector("rect"), text: g.querySelector("text"),
				x: num(g, "data-x"), c: num(g, "data-c"), d: num(g, "data-d"),
				name: title[0], info: title.slice(1).join(", "), i: i });
			g.setAttribute("data-i", String(i));
		}
		function q(sel) { return svg.querySelector(sel); }
		var details = q("text.details"), matched = q("text.matched");
		var resetBtn = q("text.reset"), searchBtn = q("text.search"), clearBtn = q("text.clear");
		var zoomed = null, term = null, matchedPct = 0;

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
		}
		function layout() {
			var t = zoomed;
			for (var i = 0; i < frames.length; i++) {
				var f = frames[i], cls = "f";
				if (!t) {
					place(f, pad + f.x / total * span, f.c / total * span);
				} else if (f.d <= t.d && f.x <= t.x && f.x + f.c >= t.x + t.c) {
					/* the frame clicked and what is under it: full width */
					place(f, pad, span);
					if (f.d < t.d) cls += " dim";
				} else if (f.d > t.d && f.x >= t.x && f.x + f.c <= t.x + t.c) {
					place(f, pad + (f.x - t.x) / t.c * span, f.c / t.c * span);
				} else {
					cls += " hide";
				}
				if (f.match) cls += " match";
				f.g.setAttribute("class", cls);
			}
			resetBtn.setAttribute("class", "btn reset" + (t ? "" : " hide"));
		}
		function zoom(f) {
			if (typeof f === "number") f = frames[f];
			zoomed = f && f.d > 0 ? f : null;
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
			for (var i = 0; i < frames.length; i++) {
				var f = frames[i];
				f.match = !!(re && f.d > 0 && re.test(f.name));
				if (f.match) spans.push([f.x, f.x + f.c]);
			}
			/* a frame and a matching frame under it count once */
			spans.sort(function (a, b) { return a[0] - b[0]; });
			var sum = 0, end = -1;
			for (var k = 0; k < spans.length; k++) {
				var a = Math.max(spans[k][0], end);
				if (spans[k][1] > a) sum += spans[k][1] - a;
				end = Math.max(end, spans[k][1]);
			}
			matchedPct = total ? 100 * sum / total : 0;
			matched.textContent = term ? "Matched: " + matchedPct.toFixed(2) + "% (" + sum + (sum === 1 ? " sample)" : " samples)") : " ";
			clearBtn.setAttribute("class", "btn clear" + (term ? "" : " hide"));
			layout();
			return matchedPct;
		}
		function frameOf(ev) {
			var n = ev.target;
			while (n && n !== svg && !(n.getAttribute && n.getAttribute("data-i") !== null)) n = n.parentNode;
			return n && n !== svg ? frames[Number(n.getAttribute("data-i"))] : null;
		}
		svg.addEventListener("click", function (ev) {
			var f = frameOf(ev);
			if (f) zoom(f);
		});
		svg.addEventListener("mouseover", function (ev) {
			var f = frameOf(ev);
			details.textContent = f ? f.name + " \u2014 " + f.info : " ";
		});
		svg.addEventListener("mouseout", function () { details.textContent = " "; });
		resetBtn.addEventListener("click", function (ev) { ev.stopPropagation(); zoom(null); });
		clearBtn.addEventListener("click", function (ev) { ev.stopPropagation(); search(null); });
		function ask() {
			var s = window.prompt("Search for functions (a regular expression)", term || "");
			if (s !== null) search(s);
		}
		searchBtn.addEventListener("click", function (ev) { ev.stopPropagation(); ask(); });
		if (document.documentElement === svg) {
			/* the SVG alone in a browser: Ctrl-F searches, Escape unzooms */
			window.addEventListener("keydown", function (ev) {
				if ((ev.ctrlKey || ev.metaKey) && ev.key === "f") { ev.preventDefault(); ask(); }
				else if (ev.key === "Escape") zoom(null);
			});
		}
		svg.tallyFlame = {
			frames: frames, zoom: zoom, search: search,
			reset: function () { zoom(null); },
			zoomed: function () { return zoomed; },
			matched: function () { return matchedPct; }
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
