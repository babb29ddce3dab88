/* tally report --html: sortable tables, the search boxes of the flame
 * graphs, and the links from the functions table to the flame graph
 * (lib/export/flame.js makes the graphs themselves interactive). */
(function () {
	"use strict";
	function sortBy(table, th) {
		var ths = table.tHead.rows[0].cells, col = th.cellIndex;
		var desc = th.className.indexOf("desc") < 0 && (th.className.indexOf("asc") >= 0 || th.getAttribute("data-t") === "n");
		for (var i = 0; i < ths.length; i++) ths[i].className = ths[i].className.replace(/ ?(asc|desc)/g, "");
		th.className += (th.className ? " " : "") + (desc ? "desc" : "asc");
		var numeric = th.getAttribute("data-t") === "n";
		var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
		rows.sort(function (a, b) {
			var x = a.cells[col], y = b.cells[col], r;
			if (numeric) r = Number(x.getAttribute("data-v")) - Number(y.getAttribute("data-v"));
			else r = x.textContent.localeCompare(y.textContent);
			return desc ? -r : r;
		});
		var frag = document.createDocumentFragment();
		for (var k = 0; k < rows.length; k++) frag.appendChild(rows[k]);
		body.appendChild(frag);
	}
	function init() {
		var tables = document.querySelectorAll("table.sortable");
		for (var i = 0; i < tables.length; i++) (function (t) {
			t.tHead.addEventListener("click", function (ev) {
				var th = ev.target.closest("th");
				if (th) sortBy(t, th);
			});
			t.tallySort = function (col) { sortBy(t, t.tHead.rows[0].cells[col]); };
		})(tables[i]);
		var tools = document.querySelectorAll(".tools[data-for]");
		for (var j = 0; j < tools.length; j++) (function (box) {
			var svg = document.getElementById(box.getAttribute("data-for"));
			if (!svg || !window.tallyFlameInit) return;
			var fg = window.tallyFlameInit(svg), input = box.querySelector("input");
			var out = box.querySelector(".matched");
			function run() {
				var p = fg.search(input.value);
				out.textContent = input.value ? "matched " + p.toFixed(2) + "%" : "";
			}
			input.addEventListener("input", run);
			box.querySelector("button.reset").addEventListener("click", function () { fg.reset(); });
			box.querySelector("button.clear").addEventListener("click", function () { input.value = ""; run(); });
		})(tools[j]);
		/* a function's name in the table: its sandwich in the flame graph, scrolled to */
		document.addEventListener("click", function (ev) {
			var a = ev.target.closest && ev.target.closest("a.tograph");
			if (!a || !window.tallyFlameInit) return;
			var svg = document.getElementById(a.getAttribute("href").substring(1));
			if (!svg) return;
			var fg = window.tallyFlameInit(svg);
			var key = fg.keyOf(a.textContent, a.getAttribute("data-image"));
			if (!fg.sandwich(key)) return; /* folded away: the link just goes to the graph */
			ev.preventDefault();
			var box = document.querySelector('.tools[data-for="' + svg.id + '"]');
			(box || svg).scrollIntoView({ block: "start" });
		});
	}
	if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
	else init();
})();
