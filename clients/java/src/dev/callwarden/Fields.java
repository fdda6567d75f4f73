package dev.callwarden;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Typed reads of the service's JSON objects. A field of the wrong type is an
 * {@link IllegalArgumentException}, which the client turns into a
 * {@link CallwardenException#BAD_RESPONSE}: an answer that is not what the service documents is
 * never read as a decision.
 */
final class Fields {

    private Fields() {}

    /** The JSON value as an object. */
    static Map<String, Object> object(Object value, String what) {
        if (!(value instanceof Map<?, ?> map)) {
            throw new IllegalArgumentException(what + " is not a JSON object");
        }
        @SuppressWarnings("unchecked") // Json.parse gives String keys; checked below for others
        Map<String, Object> object = (Map<String, Object>) map;
        for (Object key : object.keySet()) {
            if (!(key instanceof String)) {
                throw new IllegalArgumentException(what + " has a key that is not a string");
            }
        }
        return object;
    }

    /** A field that must be a string. */
    static String text(Map<String, Object> object, String key) {
        Object value = object.get(key);
        if (!(value instanceof String text)) {
            throw new IllegalArgumentException("'" + key + "' is not a string");
        }
        return text;
    }

    /** A field that is a string or null (or absent). */
    static String textOrNull(Map<String, Object> object, String key) {
        Object value = object.get(key);
        if (value != null && !(value instanceof String)) {
            throw new IllegalArgumentException("'" + key + "' is not a string");
        }
        return (String) value;
    }

    /** A field that is an object or null (or absent), as an unmodifiable copy. */
    static Map<String, Object> objectOrNull(Map<String, Object> object, String key) {
        Object value = object.get(key);
        return value == null ? null : frozen(object(value, "'" + key + "'"));
    }

    /** An unmodifiable copy (shallow: the service's nested values are kept as parsed). */
    static Map<String, Object> frozen(Map<String, Object> object) {
        return Collections.unmodifiableMap(new LinkedHashMap<>(object));
    }
}
