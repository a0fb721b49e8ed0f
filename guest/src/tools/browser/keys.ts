// Key names as agents write them (Playwright's), as CDP key events.

export interface KeyEvent {
  key: string;
  code: string;
  windowsVirtualKeyCode: number;
  text?: string;
}

const NAMED: Record<string, KeyEvent> = {
  Enter: { key: "Enter", code: "Enter", windowsVirtualKeyCode: 13, text: "\r" },
  Tab: { key: "Tab", code: "Tab", windowsVirtualKeyCode: 9 },
  Escape: { key: "Escape", code: "Escape", windowsVirtualKeyCode: 27 },
  Backspace: { key: "Backspace", code: "Backspace", windowsVirtualKeyCode: 8 },
  Delete: { key: "Delete", code: "Delete", windowsVirtualKeyCode: 46 },
  ArrowUp: { key: "ArrowUp", code: "ArrowUp", windowsVirtualKeyCode: 38 },
  ArrowDown: { key: "ArrowDown", code: "ArrowDown", windowsVirtualKeyCode: 40 },
  ArrowLeft: { key: "ArrowLeft", code: "ArrowLeft", windowsVirtualKeyCode: 37 },
  ArrowRight: { key: "ArrowRight", code: "ArrowRight", windowsVirtualKeyCode: 39 },
  Home: { key: "Home", code: "Home", windowsVirtualKeyCode: 36 },
  End: { key: "End", code: "End", windowsVirtualKeyCode: 35 },
  PageUp: { key: "PageUp", code: "PageUp", windowsVirtualKeyCode: 33 },
  PageDown: { key: "PageDown", code: "PageDown", windowsVirtualKeyCode: 34 },
  Space: { key: " ", code: "Space", windowsVirtualKeyCode: 32, text: " " },
};

/** The event for a key name, or undefined for a name this does not know. */
export function keyEvent(name: string): KeyEvent | undefined {
  const named = NAMED[name];
  if (named) return named;
  if ([...name].length !== 1) return undefined;
  const upper = name.toUpperCase();
  const letter = /^[A-Z]$/.test(upper);
  const digit = /^[0-9]$/.test(name);
  return {
    key: name,
    code: letter ? `Key${upper}` : digit ? `Digit${name}` : "",
    windowsVirtualKeyCode: letter || digit ? upper.charCodeAt(0) : 0,
    text: name,
  };
}

export const KEY_NAMES = Object.keys(NAMED);
