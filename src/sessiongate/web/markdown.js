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
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;

/** A DocumentFragment for `text`: paragraphs, headings, lists, quotes, code blocks, inline
 *  code, bold, italic and safe links. */
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
    if (BULLET.test(line) || NUMBERED.test(line)) {
      const ordered = !BULLET.test(line);
      const pattern = ordered ? NUMBERED : BULLET;
      const list = document.createElement(ordered ? "ol" : "ul");
      if (ordered) {
        const first = Number(NUMBERED.exec(line)[1]);
        if (first !== 1) list.start = first;
      }
      while (i < lines.length && pattern.test(lines[i])) {
        const match = pattern.exec(lines[i]);
        list.append(withInline("li", ordered ? match[2] : match[1]));
        i += 1;
      }
      fragment.append(list);
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
    while (i < lines.length && lines[i].trim() !== "" && !startsBlock(lines[i])) {
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
  return [FENCE, HEADING, BULLET, NUMBERED, QUOTE, RULE].some((pattern) => pattern.test(line));
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
