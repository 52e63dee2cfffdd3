import leftPad from "left-pad";

export const pad = (s) => leftPad(s, 5);
