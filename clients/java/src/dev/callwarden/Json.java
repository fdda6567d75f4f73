package dev.callwarden;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * JSON (RFC 8259) to and from plain Java values, so that the client needs nothing beyond the JDK.
 *
 * <p>{@link #parse} gives: an object as a {@code Map<String, Object>} (a {@link LinkedHashMap} in
 * the text's order; a repeated key keeps its last value, as Python's {@code json} does), an array
 * as a {@code List<Object>}, a string as a {@code String}, {@code true}/{@code false} as a
 * {@code Boolean}, {@code null} as {@code null}, and a number as a {@code Long} when it is
 * integral and fits, a {@code BigInteger} when it is integral and does not, otherwise a
 * {@code Double} ({@code BigDecimal} past a double's range, so that no number turns into
 * infinity).
 *
 * <p>{@link #write} takes those types and also {@code Integer}, {@code Short}, {@code Byte},
 * {@code Float}, any {@code Collection} and {@code Object[]}; anything else is refused rather
 * than written as its {@code toString()}.
 */
public final class Json {

    /** Nesting deeper than this is refused: a hostile text must not overflow the stack. */
    public static final int MAX_DEPTH = 512;

    private Json() {}

    /**
     * The value a JSON text holds.
     *
     * @throws IllegalArgumentException when the text is not exactly one JSON value (surrounding
     *     whitespace aside); the message gives the offset
     */
    public static Object parse(String text) {
        return new Parser(text).document();
    }

    /**
     * The JSON text of a value, on one line (control characters in strings are escaped).
     *
     * @throws IllegalArgumentException for a value JSON cannot hold: a type it has no form for, a
     *     map key that is not a string, a NaN or infinite number, or nesting past
     *     {@link #MAX_DEPTH} (which is also how a structure that contains itself is refused)
     */
    public static String write(Object value) {
        StringBuilder out = new StringBuilder();
        writeValue(out, value, 0);
        return out.toString();
    }

    // -- writing ----------------------------------------------------------------------------

    private static void writeValue(StringBuilder out, Object value, int depth) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof String text) {
            writeString(out, text);
        } else if (value instanceof Boolean flag) {
            out.append(flag.booleanValue());
        } else if (value instanceof Long || value instanceof Integer || value instanceof Short
                || value instanceof Byte || value instanceof BigInteger
                || value instanceof BigDecimal) {
            out.append(value);
        } else if (value instanceof Double || value instanceof Float) {
            double number = ((Number) value).doubleValue();
            if (Double.isNaN(number) || Double.isInfinite(number)) {
                throw new IllegalArgumentException("JSON has no form for the number " + number);
            }
            out.append(value);
        } else if (value instanceof Map<?, ?> map) {
            enter(depth);
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> entry : map.entrySet()) {
                if (!(entry.getKey() instanceof String key)) {
                    throw new IllegalArgumentException(
                            "a JSON object's keys are strings, not " + describe(entry.getKey()));
                }
                if (!first) {
                    out.append(',');
                }
                first = false;
                writeString(out, key);
                out.append(':');
                writeValue(out, entry.getValue(), depth + 1);
            }
            out.append('}');
        } else if (value instanceof Collection<?> items) {
            writeArray(out, items, depth);
        } else if (value instanceof Object[] items) {
            writeArray(out, Arrays.asList(items), depth);
        } else {
            throw new IllegalArgumentException("JSON has no form for " + describe(value));
        }
    }

    private static void writeArray(StringBuilder out, Collection<?> items, int depth) {
        enter(depth);
        out.append('[');
        boolean first = true;
        for (Object item : items) {
            if (!first) {
                out.append(',');
            }
            first = false;
            writeValue(out, item, depth + 1);
        }
        out.append(']');
    }

    private static void enter(int depth) {
        if (depth >= MAX_DEPTH) {
            throw new IllegalArgumentException(
                    "nested deeper than " + MAX_DEPTH + " levels (or it contains itself)");
        }
    }

    private static void writeString(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                case '\b' -> out.append("\\b");
                case '\f' -> out.append("\\f");
                default -> {
                    if (c < 0x20) {
                        escape(out, c);
                    } else if (Character.isHighSurrogate(c) && i + 1 < text.length()
                            && Character.isLowSurrogate(text.charAt(i + 1))) {
                        out.append(c).append(text.charAt(++i));
                    } else if (Character.isSurrogate(c)) {
                        // A lone surrogate has no UTF-8 form: written raw, it would reach the
                        // service as '?'. Escaped, it arrives as the same code unit.
                        escape(out, c);
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }

    private static void escape(StringBuilder out, char c) {
        out.append(String.format("\\u%04x", (int) c));
    }

    private static String describe(Object value) {
        return value == null ? "null" : "a " + value.getClass().getName();
    }

    // -- parsing ----------------------------------------------------------------------------

    private static final class Parser {
        private final String text;
        private int at;
        private int depth;

        Parser(String text) {
            if (text == null) {
                throw new IllegalArgumentException("JSON: no text (null)");
            }
            this.text = text;
        }

        Object document() {
            skipSpace();
            Object value = value();
            skipSpace();
            if (at < text.length()) {
                throw error("text after the value");
            }
            return value;
        }

        private Object value() {
            if (at >= text.length()) {
                throw error("a value is missing");
            }
            char c = text.charAt(at);
            switch (c) {
                case '{':
                    return object();
                case '[':
                    return array();
                case '"':
                    return string();
                case 't':
                    literal("true");
                    return Boolean.TRUE;
                case 'f':
                    literal("false");
                    return Boolean.FALSE;
                case 'n':
                    literal("null");
                    return null;
                default:
                    if (c == '-' || (c >= '0' && c <= '9')) {
                        return number();
                    }
                    throw error("unexpected " + shown(c));
            }
        }

        private Map<String, Object> object() {
            nest();
            at++; // '{'
            Map<String, Object> object = new LinkedHashMap<>();
            skipSpace();
            if (take('}')) {
                depth--;
                return object;
            }
            while (true) {
                skipSpace();
                if (at >= text.length() || text.charAt(at) != '"') {
                    throw error("a string key is missing");
                }
                String key = string();
                skipSpace();
                if (!take(':')) {
                    throw error("':' is missing after a key");
                }
                skipSpace();
                object.put(key, value());
                skipSpace();
                if (take('}')) {
                    depth--;
                    return object;
                }
                if (!take(',')) {
                    throw error("',' or '}' is missing");
                }
            }
        }

        private List<Object> array() {
            nest();
            at++; // '['
            List<Object> array = new ArrayList<>();
            skipSpace();
            if (take(']')) {
                depth--;
                return array;
            }
            while (true) {
                skipSpace();
                array.add(value());
                skipSpace();
                if (take(']')) {
                    depth--;
                    return array;
                }
                if (!take(',')) {
                    throw error("',' or ']' is missing");
                }
            }
        }

        private String string() {
            at++; // the opening quote
            StringBuilder out = new StringBuilder();
            while (true) {
                if (at >= text.length()) {
                    throw error("the string is not closed");
                }
                char c = text.charAt(at++);
                if (c == '"') {
                    return out.toString();
                }
                if (c < 0x20) {
                    at--;
                    throw error("a control character in a string (write it as an escape)");
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                if (at >= text.length()) {
                    throw error("the string is not closed");
                }
                char escaped = text.charAt(at++);
                switch (escaped) {
                    case '"' -> out.append('"');
                    case '\\' -> out.append('\\');
                    case '/' -> out.append('/');
                    case 'b' -> out.append('\b');
                    case 'f' -> out.append('\f');
                    case 'n' -> out.append('\n');
                    case 'r' -> out.append('\r');
                    case 't' -> out.append('\t');
                    // A surrogate pair arrives as two escapes; appended side by side, the two
                    // UTF-16 units are the code point they encode. A lone one is kept as it is,
                    // as Python's json keeps it.
                    case 'u' -> out.append(hex4());
                    default -> {
                        at--;
                        throw error("an unknown escape \\" + escaped);
                    }
                }
            }
        }

        private char hex4() {
            if (at + 4 > text.length()) {
                throw error("\\u needs four hex digits");
            }
            int code = 0;
            for (int i = 0; i < 4; i++) {
                char c = text.charAt(at);
                int digit;
                if (c >= '0' && c <= '9') {
                    digit = c - '0';
                } else if (c >= 'a' && c <= 'f') {
                    digit = c - 'a' + 10;
                } else if (c >= 'A' && c <= 'F') {
                    digit = c - 'A' + 10;
                } else {
                    throw error("\\u needs four hex digits");
                }
                code = code * 16 + digit;
                at++;
            }
            return (char) code;
        }

        private Object number() {
            int start = at;
            take('-');
            if (take('0')) {
                if (at < text.length() && isDigit(text.charAt(at))) {
                    throw error("a number does not start with 0 unless it is 0");
                }
            } else if (!digits()) {
                throw error("a number needs a digit");
            }
            boolean integral = true;
            if (take('.')) {
                integral = false;
                if (!digits()) {
                    throw error("a digit is missing after '.'");
                }
            }
            if (take('e') || take('E')) {
                integral = false;
                if (!take('+')) {
                    take('-');
                }
                if (!digits()) {
                    throw error("a digit is missing in the exponent");
                }
            }
            String number = text.substring(start, at);
            if (integral) {
                try {
                    return Long.parseLong(number);
                } catch (NumberFormatException tooLarge) {
                    return new BigInteger(number);
                }
            }
            double value = Double.parseDouble(number);
            return Double.isInfinite(value) ? new BigDecimal(number) : (Object) value;
        }

        private boolean digits() {
            int start = at;
            while (at < text.length() && isDigit(text.charAt(at))) {
                at++;
            }
            return at > start;
        }

        private static boolean isDigit(char c) {
            return c >= '0' && c <= '9';
        }

        private void literal(String word) {
            if (!text.startsWith(word, at)) {
                throw error("'" + word + "' is misspelt");
            }
            at += word.length();
        }

        private void nest() {
            if (++depth > MAX_DEPTH) {
                throw error("nested deeper than " + MAX_DEPTH + " levels");
            }
        }

        private boolean take(char c) {
            if (at < text.length() && text.charAt(at) == c) {
                at++;
                return true;
            }
            return false;
        }

        private void skipSpace() {
            // JSON's whitespace is these four; a no-break space or a BOM is an error.
            while (at < text.length()) {
                char c = text.charAt(at);
                if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                    return;
                }
                at++;
            }
        }

        private static String shown(char c) {
            return c >= 0x20 && c < 0x7f ? "'" + c + "'" : String.format("U+%04X", (int) c);
        }

        private IllegalArgumentException error(String what) {
            return new IllegalArgumentException("JSON: " + what + " at offset " + at);
        }
    }
}
