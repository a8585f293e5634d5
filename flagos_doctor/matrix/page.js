"use strict";
// The matrix page: draws the heat map from the JSON block #matrix-data (written by
// flagos_doctor/matrix/html.py, its shape documented there). Every string of the data is
// shown through textContent, never parsed as HTML.
(function () {
  var data = JSON.parse(document.getElementById("matrix-data").textContent);
  var KNOWN = {STRICT: "strict", BASIC_ONLY: "basic", FAILED: "failed", UNTESTED: "untested",
               NO_SCHEMA: "noschema", PENDING: "pending"};
  var NOT_ROUTED = "not routed";
  var MARK_SIGNS = ["\u2020", "~"];  // bit 0: native-also, bit 1: flaky (as the Markdown's signs)

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function verdictClass(index) {
    if (index === null) return "v-none";
    var verdict = data.verdicts[index];
    return "v-" + (Object.prototype.hasOwnProperty.call(KNOWN, verdict) ? KNOWN[verdict] : "other");
  }
  function verdictName(index) { return index === null ? NOT_ROUTED : data.verdicts[index]; }

  function legend() {
    var box = document.getElementById("legend");
    var names = data.verdicts.map(function (v, i) { return i; }).concat([null]);
    names.forEach(function (index) {
      var item = el("span", "item");
      item.appendChild(el("span", "swatch " + verdictClass(index)));
      item.appendChild(document.createTextNode(verdictName(index)));
      box.appendChild(item);
    });
    data.marks.forEach(function (mark) { box.appendChild(el("span", "item", mark[0] + " " + mark[1])); });
  }

  function header() {
    var row = document.getElementById("matrix-head");
    row.appendChild(el("th", "name", "overload"));
    data.columns.forEach(function (column, index) {
      var th = el("th");
      th.title = column.title;
      th.appendChild(el("div", "n", "#" + (index + 1) + " " + column.stack));
      column.lines.forEach(function (line) { th.appendChild(el("div", "", line)); });
      row.appendChild(th);
    });
  }

  // Each row: [overload, family, rank, cells]; a cell: null (not routed) or
  // [verdict, marks, profile, status, route, cause, profile, status, route, cause, ...].
  var rows = [];
  function body() {
    var tbody = document.getElementById("matrix-body");
    var fragment = document.createDocumentFragment();
    var family = null, familyRow = null, sizes = {};
    data.rows.forEach(function (row) { sizes[row[1]] = (sizes[row[1]] || 0) + 1; });
    data.rows.forEach(function (row, index) {
      if (row[1] !== family) {
        family = row[1];
        familyRow = {members: [], hidden: false};  // a family of one overload needs no heading
        if (sizes[family] > 1) {
          familyRow = el("tr", "family");
          familyRow.appendChild(el("td", "name", family));
          familyRow.appendChild(el("td", "", "")).colSpan = data.columns.length;
          fragment.appendChild(familyRow);
        }
        familyRow.members = [];
      }
      var tr = el("tr", "row");
      tr.dataset.row = String(index);
      tr.appendChild(el("td", "name", row[0]));
      var verdicts = {}, causes = {};
      row[3].forEach(function (value, column) {
        var verdict = value === null ? null : value[0];
        var td = el("td", "c " + verdictClass(verdict));
        td.dataset.col = String(column);
        td.title = verdictName(verdict);
        verdicts[verdict === null ? "none" : String(verdict)] = true;
        if (value !== null) {
          var signs = "";
          MARK_SIGNS.forEach(function (sign, bit) { if (value[1] & (1 << bit)) signs += sign; });
          td.textContent = signs;
          for (var k = 5; k < value.length; k += 4) if (value[k] !== null) causes[value[k]] = true;
        }
        tr.appendChild(td);
      });
      familyRow.members.push(tr);
      rows.push({tr: tr, name: row[0].toLowerCase(), rank: row[2], verdicts: verdicts, causes: causes, family: familyRow});
      fragment.appendChild(tr);
    });
    tbody.appendChild(fragment);
  }

  function controls() {
    var status = document.getElementById("status");
    data.verdicts.forEach(function (verdict, index) { status.appendChild(option(String(index), verdict)); });
    status.appendChild(option("none", NOT_ROUTED));
    var cause = document.getElementById("cause");
    data.causes.forEach(function (group, index) {
      cause.appendChild(option(String(index), group[0] + ": " + group[1] + " (" + group[2] + " cases)"));
    });
    ["q", "status", "differ", "cause"].forEach(function (id) {
      document.getElementById(id).addEventListener("input", apply);
      document.getElementById(id).addEventListener("change", apply);
    });
  }
  function option(value, text) { var node = el("option", "", text); node.value = value; return node; }

  function apply() {
    var query = document.getElementById("q").value.trim().toLowerCase();
    var status = document.getElementById("status").value;
    var differ = document.getElementById("differ").checked;
    var cause = document.getElementById("cause").value;
    var shown = 0;
    rows.forEach(function (row) { row.family.shownMembers = 0; });
    rows.forEach(function (row) {
      var visible = (!query || row.name.indexOf(query) >= 0) && (!status || row.verdicts[status] === true) &&
        (!differ || row.rank === 0) && (!cause || row.causes[cause] === true);
      row.tr.hidden = !visible;
      if (visible) { shown += 1; row.family.shownMembers += 1; }
    });
    rows.forEach(function (row) { row.family.hidden = row.family.shownMembers === 0; });
    document.getElementById("shown").textContent = shown + " of " + rows.length + " overloads shown";
  }

  var picked = null;
  function detail(event) {
    var td = event.target.closest("td.c");
    if (!td) return;
    if (picked) picked.classList.remove("picked");
    picked = td;
    td.classList.add("picked");
    var row = data.rows[Number(td.parentNode.dataset.row)];
    var column = Number(td.dataset.col);
    var value = row[3][column];
    var box = document.getElementById("detail");
    box.textContent = "";
    box.appendChild(el("h2", "", row[0]));
    box.appendChild(el("p", "run", "#" + (column + 1) + " " + data.columns[column].label));
    box.appendChild(el("p", "verdict", verdictName(value === null ? null : value[0])));
    if (value === null) return;
    var table = el("table", "cases");
    var head = el("tr");
    ["profile", "status", "cause", "route"].forEach(function (name) { head.appendChild(el("th", "", name)); });
    table.appendChild(head);
    for (var k = 2; k < value.length; k += 4) {
      var tr = el("tr", "case");
      tr.appendChild(el("td", "", data.profiles[value[k]]));
      tr.appendChild(el("td", "", data.statuses[value[k + 1]]));
      tr.appendChild(el("td", "", value[k + 3] === null ? "" : data.causes[value[k + 3]][1]));
      tr.appendChild(el("td", "", data.routes[value[k + 2]]));
      table.appendChild(tr);
    }
    box.appendChild(table);
  }

  legend();
  header();
  body();
  controls();
  apply();
  document.getElementById("matrix-body").addEventListener("click", detail);
  document.documentElement.dataset.renderedMs = performance.now().toFixed(1);
  // ... and once the first frame with the heat map laid out has been drawn.
  requestAnimationFrame(function () {
    setTimeout(function () { document.documentElement.dataset.paintedMs = performance.now().toFixed(1); }, 0);
  });
})();
