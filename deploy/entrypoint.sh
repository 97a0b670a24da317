#!/bin/bash
# The image's entry point.  Spark on Kubernetes starts the driver pod with
# `driver <spark-submit arguments>` and each executor pod with `executor`,
# the executor's settings in SPARK_* environment variables (the contract of
# the entry point of Spark's own images); any other command runs as given.
set -euo pipefail

case "${1:-}" in
    driver)
        shift
        exec /usr/bin/tini -s -- "$SPARK_HOME/bin/spark-submit" \
            --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS" \
            --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
            --deploy-mode client "$@"
        ;;
    executor)
        shift
        java_options=()
        for name in "${!SPARK_JAVA_OPT_@}"; do
            java_options+=("${!name}")
        done
        class_path="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:${HADOOP_CONF_DIR:+$HADOOP_CONF_DIR:}$SPARK_HOME/jars/*"
        class_path="$class_path${SPARK_EXTRA_CLASSPATH:+:$SPARK_EXTRA_CLASSPATH}${SPARK_DIST_CLASSPATH:+:$SPARK_DIST_CLASSPATH}:$PWD"
        exec /usr/bin/tini -s -- java "${java_options[@]}" \
            -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" -cp "$class_path" \
            org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
            --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" --cores "$SPARK_EXECUTOR_CORES" \
            --app-id "$SPARK_APPLICATION_ID" --hostname "$SPARK_EXECUTOR_POD_IP" \
            --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" --podName "$SPARK_EXECUTOR_POD_NAME"
        ;;
    *)
        exec "$@"
        ;;
esac
