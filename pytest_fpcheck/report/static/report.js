(function () {
  var PAGE = $PAGE_ROWS, INLINE = $INLINE_DETAILS, tables = {}, VIEW = null;
  function inflate(id) {
    var text = document.getElementById(id).textContent.trim();
    var bytes = Uint8Array.from(atob(text), function (c) { return c.charCodeAt(0); });
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Response(stream).text().then(JSON.parse);
  }
  function drawRow(key, row) {
    var tr = document.createElement('tr'), kind = VIEW[key];
    tr.dataset.s = row[0];
    if (row[1] === 0) tr.className = 'first';
    else if (row[1] === 2) tr.className = 'warned';
    var td = tr.insertCell(), a = document.createElement('a');
    td.className = 'test';
    a.href = '#' + key + '-' + row[2];
    a.textContent = row[3];
    td.appendChild(a);
    for (var c = 4; c < row.length; c++) {
      td = tr.insertCell();
      td.textContent = row[c];
      if (kind.right[c - 4]) td.className = 'num';
      else if (c === 4) {
        td.className = 'status s-' + row[0].replace(/[^\w-]/g, '-');
        if (row[1] === 2) {
          var mark = document.createElement('span');
          mark.className = 'mark';
          mark.title = kind.warnings[row[2]];
          mark.textContent = ' \u26A0';
          td.appendChild(mark);
        }
      } else if (kind.wide[c - 4]) td.className = 'wide';
    }
    return tr;
  }
  function draw(key) {
    var t = tables[key], fragment = document.createDocumentFragment();
    var end = Math.min(t.matches.length, t.limit);
    for (var i = 0; i < end; i++) fragment.appendChild(drawRow(key, t.matches[i].row));
    t.body.replaceChildren(fragment);
    var total = t.rows.length, found = t.matches.length;
    t.shown.textContent = found + ' of ' + total + ' shown' +
      (found > end ? ' (the first ' + end + ' listed)' : '');
    t.more.hidden = found <= end;
  }
  function sortKey(value, numeric) {
    if (!numeric) return value.toLowerCase();
    var x = parseFloat(value);
    return isNaN(x) ? (value === 'inf' ? Infinity : -Infinity) : x;
  }
  function order(key) {
    var t = tables[key];
    if (t.column < 0) {
      t.matches.sort(function (p, q) { return p.at - q.at; });
      return;
    }
    var c = t.column, numeric = VIEW[key].right[c - 4], sign = t.descending ? -1 : 1;
    t.matches.sort(function (p, q) {
      var x = sortKey(p.row[c], numeric), y = sortKey(q.row[c], numeric);
      return x < y ? -sign : x > y ? sign : p.at - q.at;
    });
  }
  function apply(key) {
    var t = tables[key];
    var words = t.bar.querySelector('.q').value.toLowerCase().split(/\s+/).filter(Boolean);
    var status = t.bar.querySelector('.s').value;
    t.matches = t.rows.filter(function (item) {
      if (status && item.row[0] !== status) return false;
      for (var w = 0; w < words.length; w++) if (item.text.indexOf(words[w]) < 0) return false;
      return true;
    });
    order(key);
    t.limit = PAGE;
    draw(key);
  }
  function sortBy(key, th) {
    var t = tables[key], c = th.cellIndex === 0 ? 3 : th.cellIndex + 3;
    t.descending = t.column === c ? !t.descending : false;
    t.column = c;
    th.parentNode.querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', t.descending ? 'descending' : 'ascending');
    order(key);
    draw(key);
  }
  function setUp(key) {
    var bar = document.querySelector('.filters[data-table="table-' + key + '"]');
    var rows = VIEW[key].rows.map(function (row, at) {
      return {row: row, at: at, text: row.slice(3).join(' ').toLowerCase()};
    });
    var table = document.getElementById('table-' + key);
    var t = tables[key] = {bar: bar, rows: rows, matches: rows.slice(), limit: PAGE,
      column: -1, descending: false, body: table.tBodies[0],
      shown: bar.querySelector('.shown'), more: document.getElementById('more-' + key)};
    bar.addEventListener('input', function () { apply(key); });
    bar.addEventListener('change', function () { apply(key); });
    table.tHead.addEventListener('click', function (event) {
      var th = event.target.closest('th');
      if (th) sortBy(key, th);
    });
    t.more.addEventListener('click', function () { t.limit += PAGE; draw(key); });
    draw(key);
    var details = VIEW[key].details, ids = Object.keys(details);
    if (ids.length <= INLINE) {
      var html = VIEW[key].rows.map(function (row) { return details[key + '-' + row[2]]; });
      document.getElementById('details-' + key).insertAdjacentHTML('beforeend', html.join(''));
    }
  }
  function open(id) {
    var target = document.getElementById(id);
    var key = id.slice(0, id.lastIndexOf('-')), kind = VIEW && VIEW[key];
    if (!target && kind && kind.details[id]) {
      document.getElementById('details-' + key).insertAdjacentHTML('afterbegin', kind.details[id]);
      target = document.getElementById(id);
    }
    if (target && target.tagName === 'DETAILS') { target.open = true; target.scrollIntoView(); }
  }
  document.addEventListener('click', function (event) {
    var link = event.target.closest && event.target.closest('a[href^="#"]');
    if (link) open(decodeURIComponent(link.getAttribute('href').slice(1)));
  });
  window.addEventListener('hashchange', function () {
    open(decodeURIComponent(location.hash.slice(1)));
  });
  inflate('fpcheck-view').then(function (view) {
    VIEW = view;
    Object.keys(VIEW).forEach(setUp);
    document.body.dataset.ready = 'yes';
    if (location.hash) open(decodeURIComponent(location.hash.slice(1)));
  });
})();
