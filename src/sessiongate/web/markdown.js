// A small Markdown renderer that builds DOM nodes. It never parses HTML: a reply's `<script>`
// or `<img onerror>` is text like any other, and a link is made only for an http(s) or
// mailto address, so sanitising is a property of the construction, not a filter.

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);

/** The href to use for a link target, or null when it must stay text. */
export function safeHref(target) {
  try {
    const url = new URL(target);
    return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
  } catch {
    return null; // relative or malformed: no base to resolve against, so no link
  }
}

const FENCE = /^\s{0,3}(```+|~~~+)\s*([\w+.-]*)\s*$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
// A list item: its indent, its marker (a bullet, or a number and `.` or `)`), its text.
const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;

/** A DocumentFragment for `text`: paragraphs, headings, lists (nested by indent), pipe
 *  tables, quotes, code blocks, inline code, bold, italic and safe links. */
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === "") {
      i += 1;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i += 1; // the closing fence (or the end of an unclosed block)
      const code = document.createElement("code");
      code.textContent = body.join("\n");
      if (fence[2]) code.dataset.language = fence[2];
      const pre = document.createElement("pre");
      pre.append(code);
      fragment.append(pre);
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      // Replies sit under the page's own h2 headings.
      const level = Math.min(heading[1].length + 2, 6);
      fragment.append(withInline(`h${level}`, heading[2]));
      i += 1;
      continue;
    }
    if (RULE.test(line)) {
      fragment.append(document.createElement("hr"));
      i += 1;
      continue;
    }
    if (LIST_ITEM.test(line)) {
      const list = parseList(lines, i, indentOf(line));
      fragment.append(list.node);
      i = list.next;
      continue;
    }
    if (isTableStart(lines, i)) {
      const table = parseTable(lines, i);
      fragment.append(table.node);
      i = table.next;
      continue;
    }
    if (QUOTE.test(line)) {
      const quoted = [];
      while (i < lines.length && QUOTE.test(lines[i])) quoted.push(QUOTE.exec(lines[i++])[1]);
      const quote = document.createElement("blockquote");
      quote.append(renderMarkdown(quoted.join("\n")));
      fragment.append(quote);
      continue;
    }
    const paragraph = [];
    while (i < lines.length && lines[i].trim() !== "" && !startsBlock(lines[i]) && !isTableStart(lines, i)) {
      paragraph.push(lines[i++]);
    }
    if (paragraph.length === 0) paragraph.push(lines[i++]); // a block start that parsed as none
    const p = document.createElement("p");
    paragraph.forEach((part, index) => {
      if (index > 0) p.append(document.createElement("br"));
      renderInline(part, p);
    });
    fragment.append(p);
  }
  return fragment;
}

function startsBlock(line) {
  return [FENCE, HEADING, LIST_ITEM, QUOTE, RULE].some((pattern) => pattern.test(line));
}

/** Columns of indent, a tab counting as four. */
function indentOf(line) {
  const lead = /^\s*/.exec(line)[0];
  return lead.replace(/\t/g, "    ").length;
}

/** The list starting at lines[i] whose items sit at `indent`; an item indented further
 *  (two columns or more) starts a list nested in the item before it, and an indented line
 *  that is no item continues the item's text. Ends at a blank line, a shallower item, or
 *  an item of the other kind (bullets after numbers). */
function parseList(lines, i, indent) {
  const first = LIST_ITEM.exec(lines[i]);
  const ordered = /\d/.test(first[2]);
  const list = document.createElement(ordered ? "ol" : "ul");
  if (ordered && Number.parseInt(first[2], 10) !== 1) list.start = Number.parseInt(first[2], 10);
  let item = null;
  while (i < lines.length) {
    const line = lines[i];
    const match = LIST_ITEM.exec(line);
    const depth = indentOf(line);
    if (!match) {
      if (item === null || line.trim() === "" || depth <= indent) break;
      item.append(document.createElement("br"));
      renderInline(line.trim(), item);
      i += 1;
      continue;
    }
    if (depth < indent) break;
    if (depth >= indent + 2 && item !== null) {
      const nested = parseList(lines, i, depth);
      item.append(nested.node);
      i = nested.next;
      continue;
    }
    if (/\d/.test(match[2]) !== ordered) break;
    item = withInline("li", match[3]);
    list.append(item);
    i += 1;
  }
  return { node: list, next: i };
}

// A table's delimiter row: `| --- | :-: | --: |` (outer pipes optional).
const TABLE_DELIMITER = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

/** A table's cells: split on `|` that is neither escaped (`\|`) nor inside a code span;
 *  the outer pipes are optional. */
export function splitCells(line) {
  const cells = [];
  let cell = "";
  let ticks = 0; // the backtick run that opened the code span we are in, or 0
  let index = 0;
  const text = line.trim();
  while (index < text.length) {
    const char = text[index];
    if (char === "\\" && text[index + 1] === "|") {
      cell += "|";
      index += 2;
      continue;
    }
    if (char === "`") {
      const run = /^`+/.exec(text.slice(index))[0].length;
      if (ticks === 0) ticks = run;
      else if (run === ticks) ticks = 0;
      cell += "`".repeat(run);
      index += run;
      continue;
    }
    if (char === "|" && ticks === 0) {
      cells.push(cell);
      cell = "";
    } else {
      cell += char;
    }
    index += 1;
  }
  cells.push(cell);
  if (text.startsWith("|")) cells.shift();
  if (text.endsWith("|") && !text.endsWith("\\|") && cells.length > 1) cells.pop();
  return cells.map((part) => part.trim());
}

function isTableStart(lines, i) {
  if (i + 1 >= lines.length || !lines[i].includes("|")) return false;
  if (!TABLE_DELIMITER.test(lines[i + 1]) || !lines[i + 1].includes("-")) return false;
  // The delimiter row has one cell per header cell (GFM): else it is no table.
  return splitCells(lines[i]).length === splitCells(lines[i + 1]).length;
}

function alignmentOf(delimiter) {
  const left = delimiter.startsWith(":");
  const right = delimiter.endsWith(":");
  if (left && right) return "center";
  if (right) return "right";
  return left ? "left" : null;
}

/** A pipe table from lines[i] (header, delimiter, rows until a blank line or a line
 *  without a pipe). Each row has exactly the header's cells: missing ones are empty,
 *  extra ones dropped. Alignment is a class, never a style attribute. */
function parseTable(lines, i) {
  const header = splitCells(lines[i]);
  const aligns = splitCells(lines[i + 1]).map(alignmentOf);
  const row = (cells, tag) => {
    const tr = document.createElement("tr");
    header.forEach((_, column) => {
      const cell = withInline(tag, cells[column] ?? "");
      if (tag === "th") cell.scope = "col";
      if (aligns[column]) cell.className = `align-${aligns[column]}`;
      tr.append(cell);
    });
    return tr;
  };
  const table = document.createElement("table");
  const head = document.createElement("thead");
  head.append(row(header, "th"));
  table.append(head);
  const body = document.createElement("tbody");
  i += 2;
  while (i < lines.length && lines[i].trim() !== "" && lines[i].includes("|")) {
    body.append(row(splitCells(lines[i]), "td"));
    i += 1;
  }
  if (body.childElementCount) table.append(body);
  // Wide tables scroll on their own instead of widening the page.
  const scroller = document.createElement("div");
  scroller.className = "table-scroll";
  scroller.append(table);
  return { node: scroller, next: i };
}

function withInline(tag, text) {
  const node = document.createElement(tag);
  renderInline(text, node);
  return node;
}

// Sticky patterns tried at each position of a line, in this order.
const CODE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/y;
// An underscore run inside a word (snake_case, __dunder__ names) is not emphasis.
const STRONG = /(\*\*(?=\S)([\s\S]*?\S)\*\*|__(?=\S)([\s\S]*?\S)__(?![\p{L}\p{N}_]))/uy;
const EMPHASIS = /(\*(?=\S)([\s\S]*?\S)\*|_(?=\S)([\s\S]*?\S)_(?![\p{L}\p{N}_]))/uy;
const LINK = /\[([^\]\n]+)\]\(([^)\s]+)\)/y;
const BARE_URL = /https?:\/\/[^\s<>"']*[^\s<>"'.,;:!?)\]]/y;

function at(pattern, text, index) {
  pattern.lastIndex = index;
  return pattern.exec(text);
}

/** Appends `text` to `parent` with its inline Markdown as elements. */
export function renderInline(text, parent) {
  let plain = "";
  const flush = () => {
    if (plain) parent.append(plain);
    plain = "";
  };
  let i = 0;
  while (i < text.length) {
    const char = text[i];
    const wordBefore = i > 0 && /[\p{L}\p{N}]/u.test(text[i - 1]);
    let match = null;
    if (char === "`" && (match = at(CODE, text, i))) {
      flush();
      const code = document.createElement("code");
      code.textContent = match[2];
      parent.append(code);
    } else if ((char === "*" || (char === "_" && !wordBefore)) && (match = at(STRONG, text, i))) {
      flush();
      parent.append(withInline("strong", match[2] ?? match[3]));
    } else if (
      (char === "*" || (char === "_" && !wordBefore)) &&
      (match = at(EMPHASIS, text, i))
    ) {
      flush();
      parent.append(withInline("em", match[2] ?? match[3]));
    } else if (char === "[" && (match = at(LINK, text, i))) {
      const href = safeHref(match[2]);
      if (href) {
        flush();
        parent.append(link(href, match[1]));
      } else {
        plain += match[0]; // shown exactly as written, never as a link
      }
    } else if (char === "h" && !wordBefore && (match = at(BARE_URL, text, i))) {
      const href = safeHref(match[0]);
      if (href) {
        flush();
        parent.append(link(href, match[0]));
      } else {
        plain += match[0];
      }
    }
    if (match) {
      i += match[0].length;
    } else {
      plain += char;
      i += 1;
    }
  }
  flush();
}

function link(href, label) {
  const a = document.createElement("a");
  a.href = href;
  a.textContent = label;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  return a;
}
