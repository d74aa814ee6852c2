#!/usr/bin/env bash
# empty-project-java.sh: the Java client as a new project adds it, by
# clients/java/README.md: `mvn -B install -DskipTests` in clients/java puts
# it in the local Maven repository, an empty Maven project depends on
# io.github.uiddispenser:uid-client, and the README's quickstart
# (clients/java/examples/Quickstart.java) runs against a live dispenser
# (scripts/with-dispenser.sh). Fails when the build fails, the example does
# not end within 120 s or prints no ID.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
project="$(mktemp -d "${TMPDIR:-/tmp}/uid-empty-java.XXXXXX")"
trap 'rm -rf "$project"' EXIT
(cd "$root/clients/java" && mvn -B -q install -DskipTests)
mkdir -p "$project/src/main/java"
cp "$root/clients/java/examples/Quickstart.java" "$project/src/main/java/"
cat >"$project/pom.xml" <<'POM'
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>quickstart</artifactId>
  <version>1.0</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>io.github.uiddispenser</groupId>
      <artifactId>uid-client</artifactId>
      <version>1.0.0</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-resources-plugin</artifactId>
        <version>3.3.1</version>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.14.0</version>
      </plugin>
      <plugin>
        <groupId>org.codehaus.mojo</groupId>
        <artifactId>exec-maven-plugin</artifactId>
        <version>3.5.1</version>
        <configuration>
          <mainClass>Quickstart</mainClass>
        </configuration>
      </plugin>
    </plugins>
  </build>
</project>
POM
cd "$project"
mvn -B -q compile
# Maven writes colour resets even in batch mode: strip them.
"$root/scripts/with-dispenser.sh" timeout 120 mvn -B -q exec:java | sed 's/\x1b\[[0-9;]*m//g' | tee out.txt
ids="$(grep -cE '^[1-9][0-9]{0,18}$' out.txt || true)"
[ "$ids" -ge 2 ] || { echo "empty-project-java: the example printed $ids IDs, want 2" >&2; exit 1; }
grep -q '^batch of 1000: ' out.txt || { echo "empty-project-java: no batch line" >&2; exit 1; }
grep -q '^Parts\[id=' out.txt || { echo "empty-project-java: no parse line" >&2; exit 1; }
echo "empty-project-java: ok (mvn install, a new project's dependency, the README's example ended and printed $ids IDs, a batch and a parse)"
