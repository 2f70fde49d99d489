// The JVM side of the interoperability tests: SoftwareMill's kmq (the version tests/interop/pom.xml names) driven
// from the command line. Run as a single-file program: java -cp <classpath> Interop.java <mode> [--option value ...]
//
// Modes (every setting an option; stdout is a line protocol, the log goes to stderr):
//   send     --bootstrap B --topic T --count N [--first I]
//            produces values "I".."I+N-1" (keys the same), prints "sent N" once all are acknowledged.
//   client   --bootstrap B --queue Q --markers M --group G --timeout-ms T [--drop-every K] [--poll-ms P]
//            a kmq KmqClient: prints "ready", then per message "processed|dropped <partition> <offset> <count> <value>"
//            (<count>: the kmq-redelivery-count header, 0 without it). With --drop-every K the first delivery of
//            every value v with v % K == 0 is left unprocessed (no END): 10 % for K = 10.
//   tracker  --bootstrap B --queue Q --markers M --group G --timeout-ms T [--use-now-after-ms U]
//            kmq's RedeliveryTracker.start; prints "started", runs until stdin closes or SIGTERM.
//   markers  --bootstrap B --markers M --partitions N
//            reads M from the start to its end with kmq's own marker deserializers and prints, per record,
//            "marker <partition> <offset> <key partition> <key offset> START <redeliver after ms>|END|EMPTY", then "end".
//   bench    --bootstrap B --queue Q --markers M --group G --timeout-ms T --messages N [--prepare-timeout-ms P]
//            [--stall-timeout-ms S]: `kmq bench`'s worker protocol (kmq/bench/protocol.py) for the jvm-kmq
//            contender: joins the group, says READY, waits for GO, then nextBatch + processed for every message
//            until N, waits for every END, says RESULT <json>.
// Every mode takes --config key=value (repeatable): Kafka client settings added to every consumer and producer.
// Each mode stops on SIGTERM or when stdin closes, closes its clients and prints "stopped".

import com.softwaremill.kmq.KafkaClients;
import com.softwaremill.kmq.KmqClient;
import com.softwaremill.kmq.KmqConfig;
import com.softwaremill.kmq.MarkerKey;
import com.softwaremill.kmq.MarkerValue;
import com.softwaremill.kmq.RedeliveryTracker;
import com.softwaremill.kmq.StartMarker;
import java.io.Closeable;
import java.io.IOException;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class Interop {
    private static final String COUNT_HEADER = "kmq-redelivery-count";
    private static final CountDownLatch STOP = new CountDownLatch(1);
    private static final CountDownLatch DONE = new CountDownLatch(1);
    private static final BlockingQueue<String> INPUT = new LinkedBlockingQueue<>();

    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            usage("a mode: send, client, tracker, markers or bench");
        }
        Options options = Options.parse(argv);
        watchStdin();
        // SIGTERM: stop the mode, and let it close its Kafka clients before the JVM halts.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            STOP.countDown();
            try {
                DONE.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        try {
            switch (argv[0]) {
                case "send" -> send(options);
                case "client" -> client(options);
                case "tracker" -> tracker(options);
                case "markers" -> markers(options);
                case "bench" -> bench(options);
                default -> usage("mode send, client, tracker, markers or bench, not " + argv[0]);
            }
        } catch (Exception e) {
            e.printStackTrace();  // the parent sees the line protocol end, and this in the log
            exit(1);
        }
        say("stopped");
        exit(0);
    }

    private static void send(Options o) throws Exception {
        int count = o.integer("count");
        long first = o.longOr("first", 0);
        TunedClients clients = o.clients();
        try (KafkaProducer<String, String> producer =
                clients.createProducer(StringSerializer.class, StringSerializer.class)) {
            List<Future<?>> sends = new ArrayList<>();
            for (long i = first; i < first + count; i++) {
                sends.add(producer.send(new ProducerRecord<>(o.text("topic"), Long.toString(i), Long.toString(i))));
            }
            for (Future<?> f : sends) {
                f.get();
            }
        }
        say("sent " + count);
    }

    private static void client(Options o) throws Exception {
        long dropEvery = o.longOr("drop-every", 0);
        long pollMs = o.longOr("poll-ms", 100);
        Set<String> seen = new HashSet<>();
        KmqClient<byte[], byte[]> client = new KmqClient<>(o.config(), o.clients(),
                ByteArrayDeserializer.class, ByteArrayDeserializer.class, pollMs);
        say("ready");
        try {
            while (STOP.getCount() > 0) {
                for (ConsumerRecord<byte[], byte[]> record : client.nextBatch()) {
                    String value = new String(record.value(), StandardCharsets.UTF_8);
                    boolean drop = dropEvery > 0 && seen.add(value) && isNumber(value)
                            && Long.parseLong(value) % dropEvery == 0;
                    if (!drop) {
                        client.processed(record);
                    }
                    say((drop ? "dropped " : "processed ") + record.partition() + " " + record.offset() + " "
                            + redeliveryCount(record) + " " + value);
                }
            }
        } finally {
            client.close();
        }
    }

    private static void tracker(Options o) throws Exception {
        Closeable tracker = RedeliveryTracker.start(o.clients(), o.config());
        say("started");
        STOP.await();
        tracker.close();
    }

    private static void markers(Options o) {
        List<TopicPartition> partitions = new ArrayList<>();
        for (int p = 0; p < o.integer("partitions"); p++) {
            partitions.add(new TopicPartition(o.text("markers"), p));
        }
        try (KafkaConsumer<MarkerKey, MarkerValue> consumer = o.clients().createConsumer(
                null, MarkerKey.MarkerKeyDeserializer.class, MarkerValue.MarkerValueDeserializer.class)) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            while (STOP.getCount() > 0 && partitions.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
                for (ConsumerRecord<MarkerKey, MarkerValue> r : consumer.poll(Duration.ofMillis(200))) {
                    MarkerValue v = r.value();
                    String kind = v == null ? "EMPTY"
                            : v instanceof StartMarker s ? "START " + s.getRedeliverAfter() : "END";
                    say("marker " + r.partition() + " " + r.offset() + " " + r.key().getPartition() + " "
                            + r.key().getMessageOffset() + " " + kind);
                }
            }
        }
        say("end");
    }

    /** One measured run, as kmq.bench.worker measures the Python contenders (see kmq/bench/measure.py). */
    private static void bench(Options o) throws Exception {
        long target = o.longOr("messages", 0);
        long stallMs = o.longOr("stall-timeout-ms", 60_000);
        KmqClient<byte[], byte[]> client = new KmqClient<>(o.config(), o.clients(),
                ByteArrayDeserializer.class, ByteArrayDeserializer.class, 500);
        try {
            KafkaConsumer<?, ?> consumer = consumerOf(client);
            long prepareDeadline = System.currentTimeMillis() + o.longOr("prepare-timeout-ms", 60_000);
            while (consumer.assignment().isEmpty()) {  // join the group: the queue is still empty
                if (System.currentTimeMillis() > prepareDeadline) {
                    throw new IllegalStateException("the JVM KmqClient got no partitions of " + o.text("queue"));
                }
                client.nextBatch();
            }
            consumer.pause(consumer.assignment());
            say("READY");
            if (!"GO".equals(INPUT.take())) {
                throw new IllegalStateException("the parent went away before the queue was loaded");
            }
            long started = System.nanoTime();
            long cpuStarted = processCpuNanos();
            consumer.resume(consumer.assignment());
            long opened = 0;
            long received = 0;
            long batches = 0;
            long lastBatch = started;
            long lastProgress = started;
            List<Future<?>> ends = new ArrayList<>();
            while (received < target) {
                var records = client.nextBatch();
                long now = System.nanoTime();
                if (records.isEmpty()) {
                    if ((now - lastBatch) / 1_000_000 > stallMs) {
                        throw new IllegalStateException("no message for " + stallMs + " ms after " + received);
                    }
                    continue;
                }
                opened = opened == 0 ? now : opened;
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    byte[] ignored = record.value();  // the same no-op processing as the other contenders
                    ends.add(client.processed(record));
                }
                received += records.count();
                batches++;
                lastBatch = now;
                if (now - lastProgress >= 250_000_000L) {
                    lastProgress = now;
                    say("PROGRESS " + received);
                }
            }
            long failed = 0;
            for (Future<?> end : ends) {  // the window ends when every END is durable
                try {
                    end.get();
                } catch (Exception e) {
                    failed++;
                }
            }
            double elapsedS = (System.nanoTime() - opened) / 1e9;
            double cpuS = (processCpuNanos() - cpuStarted) / 1e9;
            say("RESULT {\"messages\": " + received + ", \"elapsed_s\": " + elapsedS
                    + ", \"msgs_per_s\": " + received / elapsedS + ", \"cpu_s\": " + cpuS
                    + ", \"cpu_us_per_msg\": " + cpuS / Math.max(received, 1) * 1e6
                    + ", \"first_records_ms\": " + (opened - started) / 1e6 + ", \"batches\": " + batches
                    + ", \"rss_bytes\": " + rssBytes() + ", \"failed_markers\": " + failed + "}");
        } catch (Exception e) {
            say("ERROR " + e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).replace('\n', ' '));
            e.printStackTrace();
            client.close();
            exit(1);
        }
        client.close();
    }

    /** The KmqClient's own consumer (private in kmq): the bench needs its assignment to pause until GO. */
    private static KafkaConsumer<?, ?> consumerOf(KmqClient<?, ?> client) throws ReflectiveOperationException {
        Field field = KmqClient.class.getDeclaredField("msgConsumer");
        field.setAccessible(true);
        return (KafkaConsumer<?, ?>) field.get(client);
    }

    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    private static String rssBytes() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.toString(Long.parseLong(line.split("\\s+")[1]) * 1024);
            }
        }
        return "null";
    }

    /** kmq's encoding of the count: one byte, or a big-endian int32. */
    private static int redeliveryCount(ConsumerRecord<?, ?> record) {
        Header header = record.headers().lastHeader(COUNT_HEADER);
        if (header == null || header.value() == null) {
            return 0;
        }
        byte[] v = header.value();
        return v.length == 1 ? v[0] : v.length == 4 ? ByteBuffer.wrap(v).getInt() : -1;
    }

    private static boolean isNumber(String value) {
        return !value.isEmpty() && value.chars().allMatch(Character::isDigit);
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** Lines from the parent go to INPUT; the end of stdin (the parent closed it, or died) means stop. */
    private static void watchStdin() {
        Thread watcher = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    INPUT.add(line);
                }
            } catch (IOException e) {
                // a broken stdin means the parent is gone: stop as well
            }
            STOP.countDown();
            INPUT.add("");
        }, "stdin-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }

    static void usage(String problem) {
        System.err.println("Interop.java: expected " + problem
                + " (modes: send, client, tracker, markers, bench; see the top of tests/interop/Interop.java)");
        exit(2);
    }

    /** Exit at once: the shutdown hook has nothing to wait for. */
    static void exit(int code) {
        DONE.countDown();
        System.exit(code);
    }

    /** `--name value` pairs; `--config k=v` may repeat. */
    record Options(Map<String, String> values, Map<String, Object> kafka) {
        static Options parse(String[] argv) {
            Map<String, String> values = new HashMap<>();
            Map<String, Object> kafka = new HashMap<>();
            for (int i = 1; i < argv.length; i += 2) {
                if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                    usage("--option value pairs after the mode, not '" + argv[i] + "'");
                }
                String name = argv[i].substring(2);
                if (name.equals("config")) {
                    String[] kv = argv[i + 1].split("=", 2);
                    if (kv.length != 2) {
                        usage("--config key=value, not " + argv[i + 1]);
                    }
                    kafka.put(kv[0], kv[1]);
                } else {
                    values.put(name, argv[i + 1]);
                }
            }
            return new Options(values, kafka);
        }

        String text(String name) {
            String value = values.get(name);
            if (value == null) {
                usage("option --" + name);
            }
            return value;
        }

        int integer(String name) {
            return Integer.parseInt(text(name));
        }

        long longOr(String name, long otherwise) {
            return values.containsKey(name) ? Long.parseLong(values.get(name)) : otherwise;
        }

        TunedClients clients() {
            return new TunedClients(text("bootstrap"), kafka);
        }

        KmqConfig config() {
            return new KmqConfig(text("queue"), text("markers"), text("group"), text("group"),
                    longOr("timeout-ms", 30_000), longOr("use-now-after-ms", 1_000));
        }
    }

    /** kmq's KafkaClients, with the --config settings added to every client it makes. */
    static final class TunedClients extends KafkaClients {
        private final String bootstrap;
        private final Map<String, Object> extra;

        TunedClients(String bootstrap, Map<String, Object> extra) {
            super(bootstrap);
            this.bootstrap = bootstrap;
            this.extra = extra;
        }

        @Override
        public <K, V> KafkaProducer<K, V> createProducer(Class<? extends Serializer<K>> keySerializer,
                Class<? extends Serializer<V>> valueSerializer, Map<String, Object> extraConfig) {
            Map<String, Object> merged = new HashMap<>(extraConfig);
            merged.putAll(extra);
            return super.createProducer(keySerializer, valueSerializer, merged);
        }

        @Override
        public <K, V> KafkaConsumer<K, V> createConsumer(String groupId,
                Class<? extends Deserializer<K>> keyDeserializer, Class<? extends Deserializer<V>> valueDeserializer) {
            Properties props = new Properties();
            props.put("bootstrap.servers", bootstrap);
            props.put("enable.auto.commit", "false");
            props.put("auto.offset.reset", "earliest");
            props.put("key.deserializer", keyDeserializer.getName());
            props.put("value.deserializer", valueDeserializer.getName());
            if (groupId != null) {
                props.put("group.id", groupId);
            }
            props.putAll(extra);
            return new KafkaConsumer<>(props);
        }
    }
}
