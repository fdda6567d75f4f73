package dev.callwarden;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

/**
 * {@link Json} under test: each stdin line is a JSON text in base64 (so that any text, line
 * breaks and all, is one line); each stdout line answers it with {@code ok } and the value
 * written again by {@link Json#write}, or {@code error } and the parser's message.
 */
public final class JsonEcho {

    private JsonEcho() {}

    /** Echoes until stdin ends. */
    public static void main(String[] args) throws IOException {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false,
                                          StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(
                new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String text = new String(Base64.getDecoder().decode(line), StandardCharsets.UTF_8);
            String answer;
            try {
                answer = "ok " + Json.write(Json.parse(text));
            } catch (IllegalArgumentException e) {
                answer = "error " + e.getMessage().replace('\n', ' ');
            }
            out.println(answer);
        }
        out.flush();
    }
}
